"""Image formats recognised from their bytes (magic numbers), never from a name or a declared type.

A client may call a PNG `photo.jpg` or label a text file `image/png`; only the leading bytes say
what a file is. The formats are the ones the image-edit operation accepts (JPG/JPEG, PNG, BMP,
TIFF, WEBP).
"""

from __future__ import annotations

import struct

IMAGE_MEDIA_TYPES: dict[str, str] = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "bmp": "image/bmp",
    "tiff": "image/tiff",
    "webp": "image/webp",
}

_PNG = b"\x89PNG\r\n\x1a\n"
# A BMP's "BM" is only two bytes, so the DIB header size that follows the 14-byte file header is
# checked too: these are the sizes of the header versions that exist (CORE, INFO, V2..V5, OS/2 2).
_BMP_DIB_SIZES = {12, 40, 52, 56, 64, 108, 124}


def detect_image_type(data: bytes) -> str | None:
    """"png", "jpeg", "bmp", "tiff" or "webp" from the leading bytes of `data`; None otherwise."""
    if data.startswith(_PNG):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):  # classic and BigTIFF, both byte orders
        return "tiff"
    if len(data) >= 16 and data[:4] == b"RIFF" and data[8:12] == b"WEBP" and data[12:15] == b"VP8":
        return "webp"  # the first chunk is VP8 (lossy), VP8L (lossless) or VP8X (extended)
    if len(data) >= 18 and data[:2] == b"BM":
        (dib_size,) = struct.unpack_from("<I", data, 14)
        if dib_size in _BMP_DIB_SIZES:
            return "bmp"
    return None


_JPEG_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # SOFn; not DHT, JPG, DAC


def image_dimensions(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, JPEG or WEBP from its header; None when it cannot be read."""
    kind = detect_image_type(data)
    try:
        if kind == "png" and data[12:16] == b"IHDR":
            return struct.unpack_from(">II", data, 16)
        if kind == "jpeg":
            return _jpeg_dimensions(data)
        if kind == "webp":
            chunk = data[12:16]
            if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
                width, height = struct.unpack_from("<HH", data, 26)
                return width & 0x3FFF, height & 0x3FFF
            if chunk == b"VP8L" and data[20] == 0x2F:
                (bits,) = struct.unpack_from("<I", data, 21)
                return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if chunk == b"VP8X":
                return (int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1)
    except (struct.error, IndexError):
        return None
    return None


def _jpeg_dimensions(data: bytes) -> tuple[int, int] | None:
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill bytes before a marker
            pos += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            pos += 2
            continue
        (length,) = struct.unpack_from(">H", data, pos + 2)
        if marker in _JPEG_FRAME_MARKERS:
            height, width = struct.unpack_from(">HH", data, pos + 5)
            return width, height
        pos += 2 + length
    return None


def png_has_alpha(data: bytes) -> bool:
    """Whether a PNG carries transparency: an alpha colour type, or a tRNS chunk before its pixels."""
    if detect_image_type(data) != "png" or len(data) < 26:
        return False
    if data[25] in (4, 6):  # greyscale + alpha, RGB + alpha
        return True
    pos = 8
    while pos + 8 <= len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        tag = data[pos + 4:pos + 8]
        if tag == b"tRNS":
            return True
        if tag in (b"IDAT", b"IEND"):
            return False
        pos += 12 + length
    return False
