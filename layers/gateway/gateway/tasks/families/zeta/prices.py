"""How a zeta task is priced: as Ark bills it, by the tokens of the video it renders.

Ark counts `tokens = width x height x frames per second x duration / 1024` (its pricing page,
"video generation": the figure its task answer reports as `usage.completion_tokens`; new-api's
relay/channel/task/doubao bills that same field), and the model's price is per million of them
(`output_per_million` in gateway/prices.py). The size follows the resolution (`--rs`, by default
1080p on the pro model and 720p on lite) and the ratio, which an image-to-video task may take
from its image (`adaptive`), so the hold takes the largest size of the resolution: the worst
case. The settlement prices the tokens Ark reports, never more than the hold.
"""

from __future__ import annotations

from gateway.prices import Price, token_cost

#: Ark's output sizes of Seedance 1.0 (width, height) per resolution and ratio (its video
#: generation API reference, the resolution/ratio table).
PIXELS: dict[str, dict[str, tuple[int, int]]] = {
    "480p": {"16:9": (864, 480), "4:3": (736, 544), "1:1": (640, 640), "3:4": (544, 736), "9:16": (480, 864),
             "21:9": (960, 416)},
    "720p": {"16:9": (1248, 704), "4:3": (1120, 832), "1:1": (960, 960), "3:4": (832, 1120),
             "9:16": (704, 1248), "21:9": (1504, 640)},
    "1080p": {"16:9": (1920, 1088), "4:3": (1664, 1248), "1:1": (1440, 1440), "3:4": (1248, 1664),
              "9:16": (1088, 1920), "21:9": (2176, 928)},
}
FPS = 24  # Seedance 1.0 renders 24 frames per second (the only --fps it takes)
TOKEN_PIXELS = 1024


def default_resolution(model: str) -> str:
    """Ark's default `--rs`: 1080p on the pro model, 720p on lite."""
    return "1080p" if "-pro-" in model else "720p"


def worst_case_tokens(resolution: str, ratio: str | None, seconds: int) -> int:
    """The most tokens a video of that resolution (and ratio, when fixed) and length can cost."""
    sizes = PIXELS[resolution]
    width, height = sizes[ratio] if ratio in sizes else max(sizes.values(), key=lambda wh: wh[0] * wh[1])
    return -(-width * height * FPS * seconds // TOKEN_PIXELS)


def tokens_cost(price: Price, tokens: int) -> int:
    """Units for `tokens` of video at the model's per-million price."""
    return token_cost(price, input_tokens=0, output_tokens=tokens)
