"""An uploaded audio file's format and duration, from its bytes: what a transcription is held
and, when the upstream reports nothing, billed by.

The format comes from the file's magic bytes (RIFF/WAVE, ID3 or an MPEG frame sync, fLaC, OggS,
an ISO `ftyp` box, EBML for WebM); the duration from tinytag (MIT, pure Python), which reads wav,
mp3, flac, ogg (Vorbis, Opus) and m4a but not WebM. Both trust the file's headers, and a header can
lie (a WAV whose `data` size claims 4 GB reads as 37 hours; LiteLLM billed 192 trillion seconds
for an Opus file: BerriAI/litellm#22622), so a duration is checked against the file's size:

- `max_seconds`, the longest the file can be: its audio bytes over the lowest byte rate its format
  can have (WAV: its own byte rate, exact; MP3: MPEG-2.5's 8 kbit/s; Opus: 6 kbit/s; ...). The
  hold covers it, and no duration read is ever taken above it;
- a duration of zero, not finite, or whose implied byte rate is above any the format can carry
  (random bytes after an MPEG frame sync read as 0.03 s) is not audio: a 400 naming `file`.

WebM has no pure-Python reader: it is accepted by its magic bytes with no duration (`seconds`
None), and its transcription is billed by the upstream's reported usage (api/audio.py).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

from gateway.errors import InvalidRequest

#: The lowest byte rate of each compressed format (the longest a file of its size can be).
_MIN_BYTES_PER_SECOND = {"mp3": 1000, "ogg": 750, "webm": 750, "mp4": 500, "flac": 100}
#: The highest byte rate a compressed format carries (MP3's 320 kbit/s, with room for Opus's 510).
_MAX_BYTES_PER_SECOND = {"mp3": 40_000, "ogg": 64_000, "webm": 64_000, "mp4": 64_000}
FORMATS = ("wav", "mp3", "flac", "ogg", "mp4", "webm")


@dataclass(frozen=True)
class Audio:
    format: str  # one of FORMATS
    seconds: float | None  # the duration read and checked; None for WebM
    max_seconds: float  # the longest the file can be


def _not_audio(why: str) -> InvalidRequest:
    return InvalidRequest(f"file: {why}; send flac, m4a, mp3, mp4, mpeg, mpga, oga, ogg, wav or webm audio",
                          param="file", code="invalid_audio")


def sniff(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "mp3"
    if data[:4] == b"fLaC":
        return "flac"
    if data[:4] == b"OggS":
        return "ogg"
    if data[4:8] == b"ftyp":
        return "mp4"
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return "webm"
    return None


def _id3_size(data: bytes) -> int:
    """An ID3v2 tag's whole length (cover art can be most of a short file), else 0."""
    if data[:3] != b"ID3" or len(data) < 10:
        return 0
    size = 0
    for byte in data[6:10]:
        size = (size << 7) | (byte & 0x7F)
    return 10 + size + (10 if data[5] & 0x10 else 0)


def read(data: bytes) -> Audio:
    """The file's format and duration, or a 400 naming `file` when it is not audio."""
    from tinytag import TinyTag
    from tinytag.tinytag import ParseError, UnsupportedFormatError

    kind = sniff(data)
    if kind is None:
        raise _not_audio("is not an audio file this gateway recognises")
    if kind == "webm":
        return Audio("webm", None, len(data) / _MIN_BYTES_PER_SECOND["webm"])
    try:
        tag = TinyTag.get(file_obj=io.BytesIO(data), tags=False)
    except (ParseError, UnsupportedFormatError, ValueError, KeyError, IndexError, EOFError, OSError) as exc:
        raise _not_audio(f"could not be read as {kind} audio ({type(exc).__name__})") from None
    seconds = tag.duration
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise _not_audio(f"has no readable {kind} audio in it")
    audio_bytes = len(data) - _id3_size(data)
    if kind == "wav":
        rate = (tag.samplerate or 0) * (tag.channels or 0) * (tag.bitdepth or 0) // 8
        if rate <= 0:
            raise _not_audio("is a WAV file without a usable format chunk")
        longest = max(len(data) - 44, 0) / rate
    else:
        longest = audio_bytes / _MIN_BYTES_PER_SECOND[kind]
        ceiling = _MAX_BYTES_PER_SECOND.get(kind)
        if ceiling is not None and audio_bytes / seconds > ceiling * 1.5:
            raise _not_audio(f"is not {kind} audio (its {seconds:.3f} s would take {audio_bytes} bytes)")
    return Audio(kind, min(seconds, longest), longest)
