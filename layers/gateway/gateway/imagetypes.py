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
