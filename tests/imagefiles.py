"""Sample files of every accepted image format, multipart bodies as httpx sends them, a PNG check.

Shared by the unit tests of the images parts and the integration and end-to-end tests of the
images routes.
"""

from __future__ import annotations

import struct
import zlib

import httpx

from gateway_local.simulators.images import png_image

PNG = png_image(4, 3, (200, 10, 30))
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + b"\x00" * 32 + b"\xff\xd9"
BMP = b"BM" + struct.pack("<IHHI", 70, 0, 0, 54) + struct.pack("<IiiHH", 40, 2, 2, 1, 24) + b"\x00" * 40
TIFF_LE = b"II*\x00\x08\x00\x00\x00" + b"\x00" * 16
TIFF_BE = b"MM\x00*\x00\x00\x00\x08" + b"\x00" * 16
WEBP = b"RIFF" + struct.pack("<I", 26) + b"WEBPVP8L" + struct.pack("<I", 14) + b"\x2f" + b"\x00" * 13


def jpeg_of(width: int, height: int) -> bytes:
    """A JPEG header that states its size: SOI, APP0 (JFIF), SOF0, then EOI (no pixel data)."""
    app0 = b"\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def mask_png(width: int, height: int, *, alpha: bool = True) -> bytes:
    """An RGBA PNG (colour type 6) whose left half is fully transparent: the area to edit.
    `alpha=False` gives the same picture as plain RGB, which is no mask."""
    channels = 4 if alpha else 3
    rows = b"".join(b"\x00" + b"".join(bytes([0, 0, 0, 0 if x < width // 2 else 255][:channels])
                                        for x in range(width)) for _ in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 6 if alpha else 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def multipart(fields: dict[str, str] | None = None, files: dict | None = None) -> tuple[bytes, str]:
    """The body and Content-Type that httpx itself sends for this form."""
    request = httpx.Request("POST", "http://test/", data=fields or {}, files=files or {})
    return request.read(), request.headers["content-type"]


def decode_png(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG after checking its signature, IHDR and that IDAT inflates."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, tag = struct.unpack(">I4s", data[8:16])
    assert tag == b"IHDR" and length == 13
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    assert (depth, colour) == (8, 2)
    assert zlib.crc32(data[12:16 + length]) & 0xFFFFFFFF == struct.unpack(">I", data[16 + length:20 + length])[0]
    idat_at = data.index(b"IDAT")
    (idat_len,) = struct.unpack(">I", data[idat_at - 4:idat_at])
    pixels = zlib.decompress(data[idat_at + 4:idat_at + 4 + idat_len])
    assert len(pixels) == height * (1 + 3 * width)
    assert data.endswith(b"IEND\xaeB`\x82")
    return width, height
