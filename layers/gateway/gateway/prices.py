"""Prices of models in USD, and their conversion to quota units.

The shipped table below holds a price for every model the gateway knows; the `prices:` section
of the channels document overrides or extends it per model, and the operator's site option
`ModelPrice` (edited in the console, `PUT /api/option/`) overrides both: shipped < document <
option, each layer replacing a model's whole price. A model with no price is refused, never
served for free. All arithmetic is in `Decimal`; a request's cost is rounded up to a whole unit
once.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

from gateway.errors import InvalidRequest, shown

UNITS_PER_USD = 500_000
MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    input_per_million: Decimal | None = None
    output_per_million: Decimal | None = None
    cached_input_per_million: Decimal | None = None
    # Writing a prompt cache entry (the messages dialect's `cache_creation_input_tokens`, the chat
    # and responses dialects' `cache_write_tokens`): for 5 minutes, and for an hour where the
    # upstream sells that (its own, dearer, rate). Unset: the input rate (the 1-hour: the 5-minute).
    cache_write_per_million: Decimal | None = None
    cache_write_1h_per_million: Decimal | None = None
    per_image: Decimal | None = None
    # Each megapixel of an image after its first, whose price is `per_image` (BFL's FLUX.2 way:
    # `tasks/families/beta/prices.py`); unset: an image costs `per_image` whatever its size.
    per_extra_megapixel: Decimal | None = None
    image_input_per_million: Decimal | None = None  # input images of an edit, per token the upstream reports
    per_second: Decimal | None = None
    per_call: Decimal | None = None
    # Rerank: per search unit (Cohere's and Bedrock's: one query over up to 100 documents), or per
    # million tokens the upstream reports (Jina, Voyage, TEI).
    per_search_unit: Decimal | None = None
    rerank_per_million: Decimal | None = None
    # Moderation, per input item (text or image); OpenAI's is free, so the shipped ones are 0.
    per_moderation: Decimal | None = None
    # Speech: per million input characters (tts-1), or per token (`input_per_million` for the text
    # and this for the audio made: gpt-4o-mini-tts).
    per_million_characters: Decimal | None = None
    audio_output_per_million: Decimal | None = None
    # Transcription and translation: per second of input audio (whisper-1), or per token
    # (this for the audio heard, `input_per_million` for a prompt, `output_per_million` for the text).
    per_audio_second: Decimal | None = None
    audio_input_per_million: Decimal | None = None
    # What a batch (`/v1/batches`) pays of every rate above: unset, `DEFAULT_BATCH_RATIO` (the
    # upstreams sell batches at half price). A ratio, not USD.
    batch_ratio: Decimal | None = None

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> Price:
        unknown = set(spec) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown price field(s): {', '.join(sorted(unknown))}")
        values = {}
        for name, value in spec.items():
            amount = Decimal(str(value))
            if amount < 0:
                raise ValueError(f"{name} must not be negative")
            values[name] = amount
        return cls(**values)

    def fields(self) -> dict[str, str]:
        """The fields set, as decimal text (how the option and a task's stored price keep it)."""
        return {f.name: _text(getattr(self, f.name)) for f in fields(self) if getattr(self, f.name) is not None}


#: A batch's share of the synchronous price when the model's price sets no `batch_ratio`.
DEFAULT_BATCH_RATIO = Decimal("0.5")


def batch_price(price: Price, default: Decimal = DEFAULT_BATCH_RATIO) -> Price:
    """The price of a batch's lines: every rate times the model's batch ratio, `default` when it
    sets none (a line is then priced by `token_cost` as a synchronous request is, rounded up once
    per line)."""
    ratio = default if price.batch_ratio is None else price.batch_ratio
    return Price(**{f.name: (None if getattr(price, f.name) is None or f.name == "batch_ratio"
                             else getattr(price, f.name) * ratio) for f in fields(price)})


def _text(amount: Decimal) -> str:
    text = format(amount, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _p(**spec: Any) -> Price:
    return Price.of(spec)


# Text models of the built-in simulators and the neutral demo names of architecture.md, at the
# ratios the upstreams sell by: a cache read 0.1x the input, a cache write 1.25x (5 minutes) or 2x
# (1 hour), as the messages upstream prices them.
_TEXT = {name: _p(input_per_million=i, output_per_million=o, cached_input_per_million=c, cache_write_per_million=w,
                  cache_write_1h_per_million=h) for name, i, o, c, w, h in [
    ("m-small", "0.50", "1.50", "0.05", "0.625", "1.00"),
    ("m-large", "3.00", "15.00", "0.30", "3.75", "6.00"),
]}
_TEXT["m-embed"] = _p(input_per_million="0.02", output_per_million="0", cached_input_per_million="0")

# Image models (per image produced; edits multiply by n; iota edits add their input images' tokens).
_IMAGES = {
    "iota-image-1": _p(per_image="0.04", image_input_per_million="10.00"),
    "iota-image-1-mini": _p(per_image="0.011", image_input_per_million="2.50"),
    "theta-3": _p(per_image="0.04"),
    "eta-image-edit": _p(per_image="0.03"),
}

# Video models, per second of video produced.
_VIDEO = {
    **{m: _p(per_second="0.50") for m in ("delta-2.0-generate-001", "delta-2.0-generate-preview",
                                          "delta-2.0-generate-exp")},
    **{m: _p(per_second="0.40") for m in ("delta-3.0-generate-001", "delta-3.0-generate-preview",
                                          "delta-3.1-generate-preview", "delta-3.1-generate-001")},
    **{m: _p(per_second="0.15") for m in ("delta-3.0-fast-generate-001", "delta-3.0-fast-generate-preview",
                                          "delta-3.1-fast-generate-preview", "delta-3.1-fast-generate-001")},
    "epsilon-2": _p(per_second="0.10"),
    "epsilon-2-pro": _p(per_second="0.30"),
}

# Zeta video, per million of the tokens Ark bills (width x height x fps x seconds / 1024:
# `tasks/families/zeta/prices.py`), at Ark's own rates for Seedance 1.0 pro and lite.
_ZETA = {
    "zeta-video-1-0-lite-i2v-250428": _p(output_per_million="1.80"),
    "zeta-video-1-0-lite-t2v-250428": _p(output_per_million="1.80"),
    "zeta-video-1-0-pro-250528": _p(output_per_million="2.50"),
}

# Gamma video, per second at 720P; the family multiplies by its resolution factor (480P 0.5,
# 1080P 1.5: `tasks/families/gamma/schema.py`).
_GAMMA = {m: _p(per_second="0.10") for m in ("gamma2.6-i2v", "gamma2.6-t2v", "gamma2.5-i2v-preview",
                                            "gamma2.5-t2v-preview")}

# Beta images, by megapixels as BFL bills FLUX.2 [pro]: 0.03 USD for the first megapixel of the
# image, 0.015 USD for each further one, megapixels rounded up (`tasks/families/beta/prices.py`).
_BETA = {"beta-2-pro": _p(per_image="0.03", per_extra_megapixel="0.015")}

# Image tasks (imgtask), per call: one model per action, held at submit and settled on SUCCESS.
# A grid (imagine, variation, zoom, pan, blend, a modal's custom zoom or region vary) costs
# what four images do; an upscale, one; describe and shorten are text answers, half of that.
_IMGTASK = {f"imgtask-{action}": _p(per_call=usd) for action, usd in [
    ("imagine", "0.10"), ("variation", "0.10"), ("zoom", "0.10"), ("pan", "0.10"), ("blend", "0.10"),
    ("modal", "0.10"), ("upscale", "0.05"), ("describe", "0.05"), ("shorten", "0.05"), ("swap-face", "0.05"),
]}

# Alpha, per second of std video (pro: 3.5x, by the family's mode factor) or per image. The
# first generation (v1*) costs 0.028 USD/s (0.14 USD for 5 s std); the second (v2*) about 10x
# (1.40 USD for 5 s std, 2.80 USD for 10 s: 20x the first's 5 s); omni and motion-control in between.
_ALPHA = {
    **{m: _p(per_second="0.028") for m in ("alpha-v1", "alpha-v1-5", "alpha-v1-6")},
    **{m: _p(per_second="0.28") for m in ("alpha-v2-master", "alpha-v2-1-master", "alpha-v2-1",
                                          "alpha-v2-5-turbo")},
    "alpha-video-o1": _p(per_second="0.112"),
    "alpha-image-o1": _p(per_image="0.028"),
}

# Speech, transcription, rerank and moderation (docs/prices.md "Audio, rerank and moderation"): the
# simulators' models at the rates OpenAI sells tts-1 ($15 per million characters) and whisper-1
# ($0.006 a minute), and Cohere its rerank ($2 per 1000 search units); moderation is free.
_AUDIO = {
    "m-tts": _p(per_million_characters="15.00"),
    "m-transcribe": _p(per_audio_second="0.0001"),
    "m-rerank": _p(per_search_unit="0.002"),
    **{m: _p(per_moderation="0") for m in ("m-moderation", "omni-moderation-latest", "text-moderation-latest")},
}

SHIPPED: dict[str, Price] = {**_TEXT, **_IMAGES, **_VIDEO, **_ZETA, **_GAMMA, **_BETA, **_IMGTASK, **_ALPHA,
                             **_AUDIO}


class PriceTable:
    """The prices in force: the shipped table, the channels document's `prices:` over it, and
    (`with_option`) the operator's `ModelPrice` option over both."""

    def __init__(self, overrides: Mapping[str, Mapping[str, Any]] | None = None):
        self._prices = dict(SHIPPED)
        self._sources = dict.fromkeys(SHIPPED, "shipped")
        for model, spec in (overrides or {}).items():
            try:
                self._prices[model] = Price.of(spec)
            except (ValueError, ArithmeticError) as exc:
                raise ValueError(f"prices.{model}: {exc}") from None
            self._sources[model] = "channels document"
        self._defaults: Mapping[str, Price] = self._prices
        self._default_sources: Mapping[str, str] = self._sources

    def with_option(self, option: Mapping[str, Price]) -> PriceTable:
        """This table with the operator's `ModelPrice` entries over it (each replaces a model's
        whole price); removing an entry falls back to the document's or the shipped price."""
        if not option and self._prices is self._defaults:
            return self
        table = PriceTable.__new__(PriceTable)
        table._defaults, table._default_sources = self._defaults, self._default_sources
        table._prices = {**self._defaults, **option}
        table._sources = {**self._default_sources, **dict.fromkeys(option, "option")}
        return table

    def models(self) -> list[str]:
        return sorted(self._prices)

    def default(self, model: str) -> Price | None:
        """The price without the operator's option: the document's, else the shipped one."""
        return self._defaults.get(model)

    def source(self, model: str) -> str | None:
        """Where the price in force comes from: `option`, `channels document`, `shipped` (None: unpriced)."""
        return self._sources.get(model)

    def __contains__(self, model: str) -> bool:
        return model in self._prices

    def get(self, model: str) -> Price:
        price = self._prices.get(model)
        if price is None:
            raise InvalidRequest(f"model '{shown(model)}' has no price configured, so it cannot be served",
                                 param="model", code="model_not_priced")
        return price


#: The `ModelPrice` option's bounds: it shares one DynamoDB item (400 KB) with every site option.
MAX_OPTION_MODELS = 500
MAX_MODEL_NAME = 200
MAX_USD = Decimal(1_000_000)  # per million tokens, per image, per second or per call
MAX_DECIMALS = 12  # a millionth of a micro-dollar: far below a unit, and a short decimal text
MAX_OPTION_CHARS = 100_000
OPTION_FIELDS = tuple(f.name for f in fields(Price))


@functools.lru_cache(maxsize=8)
def parse_option(text: str) -> Mapping[str, Price]:
    """The `ModelPrice` option's rule (new-api's key; our field names): a JSON object of model
    names to objects of `Price` fields, each a number or a decimal string, at least 0 and at most
    1000000 USD, at least one field a model. `ValueError` names the model and the field that
    broke. Parsed once per text (every request reads the option)."""
    if len(text) > MAX_OPTION_CHARS:
        raise ValueError(f"must have at most {MAX_OPTION_CHARS} characters")
    try:  # NaN and Infinity stay what they are (a float), refused below naming their field
        value = json.loads(text, parse_float=Decimal, parse_int=Decimal, parse_constant=float)
    except ValueError:
        raise ValueError("must be a JSON object of model names to prices") from None
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object of model names to prices")
    if len(value) > MAX_OPTION_MODELS:
        raise ValueError(f"may price at most {MAX_OPTION_MODELS} models")
    found: dict[str, Price] = {}
    for model, spec in value.items():
        if not (0 < len(model) <= MAX_MODEL_NAME and model.isprintable() and model.strip() == model
                and model != "*"):
            raise ValueError(f"model '{shown(model, 40)}': a model name has 1 to {MAX_MODEL_NAME} printable "
                             "characters, no space at either end")
        if not isinstance(spec, dict):
            raise ValueError(f"{model}: must be an object of price fields ({', '.join(OPTION_FIELDS)})")
        if not spec:
            raise ValueError(f"{model}: must set at least one price field (remove the model to use its default)")
        amounts = {}
        for name, amount in spec.items():
            if name not in OPTION_FIELDS:
                raise ValueError(f"{model}.{shown(name, 40)}: is not a price field (one of {', '.join(OPTION_FIELDS)})")
            amounts[name] = _amount(model, name, amount)
        found[model] = Price(**amounts)
    return found


def _amount(model: str, name: str, value: Any) -> Decimal:
    where = f"{model}.{name}"
    if isinstance(value, str):
        text = value.strip()
        try:
            amount = Decimal(text) if text and len(text) <= 40 else None
        except ArithmeticError:
            amount = None
    elif isinstance(value, Decimal):
        amount = value
    else:
        amount = None
    if amount is None or not amount.is_finite():
        raise ValueError(f"{where}: must be a number of USD (got {shown(json.dumps(value, default=str), 40)})")
    if name == "batch_ratio" and not 0 <= amount <= 1:
        raise ValueError(f"{where}: a batch's share of the price, at least 0 and at most 1 (got {shown(value, 40)})")
    if amount < 0 or amount > MAX_USD:
        raise ValueError(f"{where}: must be at least 0 and at most {MAX_USD} USD (got {shown(value, 40)})")
    if amount and amount.normalize().as_tuple().exponent < -MAX_DECIMALS:  # type: ignore[operator]
        raise ValueError(f"{where}: must have at most {MAX_DECIMALS} decimal places (got {shown(value, 40)})")
    return amount


def usd_text(units: int) -> str:
    """Quota as a person reads it: "$5.00 (2,500,000 units)" (cents, or up to 6 places below $1;
    the units beside, for the scripts and the operator's tools that count them)."""
    usd = Decimal(int(units)) / UNITS_PER_USD
    places = 2 if abs(usd) >= 1 or usd == usd.quantize(Decimal("0.01")) else 6
    amount = f"{abs(usd):,.{places}f}"
    if places == 6:
        amount = amount.rstrip("0")
        amount += "0" * max(0, 2 - len(amount.split(".")[1]))
    return f"{'-' if usd < 0 else ''}${amount} ({int(units):,} unit{'' if abs(int(units)) == 1 else 's'})"


def usd_to_units(usd: Decimal) -> int:
    """Whole quota units for an amount in USD, rounded up (a fraction of a unit is a unit)."""
    return int((usd * UNITS_PER_USD).to_integral_value(rounding=ROUND_CEILING))


def with_ratio(units: int, ratio: Decimal | str | int = 1) -> int:
    """A price in units times a group's ratio (`gateway.groups`), rounded up to a whole unit. The
    one place a group ratio meets a price: `admission.billing` applies it to a hold and to its
    settlement alike, with the ratio the hold was taken at (monotonic: a price within its hold
    stays within the hold)."""
    ratio = Decimal(str(ratio))
    if ratio == 1:
        return int(units)
    return int((Decimal(int(units)) * ratio).to_integral_value(rounding=ROUND_CEILING))


def units_to_usd(units: int) -> Decimal:
    return Decimal(units) / UNITS_PER_USD


def units_to_whole_usd(units: int) -> int:
    return int(units_to_usd(units).to_integral_value(rounding=ROUND_FLOOR))


def token_cost(price: Price, *, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0,
               cache_write_tokens: int = 0, cache_write_1h_tokens: int = 0) -> int:
    """Units for a text request. `input_tokens` is the whole prompt: of it, cached reads at the
    cached rate, cache writes at the cache-write rate (`cache_write_1h_tokens` of them, written
    for an hour, at the 1-hour rate), the rest at the input rate; a rate the price leaves unset
    falls back to the input rate (the 1-hour to the 5-minute)."""
    if price.input_per_million is None and price.output_per_million is None:
        raise InvalidRequest("this model is not priced per token", param="model")
    input_rate = price.input_per_million or Decimal(0)
    cached_rate = _or(price.cached_input_per_million, input_rate)
    write_rate = _or(price.cache_write_per_million, input_rate)
    write_1h_rate = _or(price.cache_write_1h_per_million, write_rate)
    fresh = max(input_tokens - cached_input_tokens - cache_write_tokens, 0)
    written_1h = min(cache_write_1h_tokens, cache_write_tokens)
    usd = (Decimal(fresh) * input_rate + Decimal(cached_input_tokens) * cached_rate
           + Decimal(cache_write_tokens - written_1h) * write_rate + Decimal(written_1h) * write_1h_rate
           + Decimal(output_tokens) * (price.output_per_million or 0)) / MILLION
    return usd_to_units(usd)


def _or(rate: Decimal | None, fallback: Decimal) -> Decimal:
    return fallback if rate is None else rate


def unit_cost(price: Price, *, images: Decimal | int = 0, seconds: Decimal | int = 0, calls: Decimal | int = 0,
              image_input_tokens: int = 0) -> int:
    """Units for a request priced per image, per second of output, or per call (counts may carry
    a family's multiplier, so they may be fractional; the total is rounded up once); the input
    images' tokens of an edit add to the per-image price when the model prices them (else free)."""
    usd = Decimal(0)
    if images:
        if price.per_image is None:
            raise InvalidRequest("this model is not priced per image", param="model")
        usd += price.per_image * images
    if image_input_tokens and price.image_input_per_million is not None:
        usd += price.image_input_per_million * image_input_tokens / MILLION
    if seconds:
        if price.per_second is None:
            raise InvalidRequest("this model is not priced per second", param="model")
        usd += price.per_second * Decimal(seconds)
    if calls:
        if price.per_call is None:
            raise InvalidRequest("this model is not priced per call", param="model")
        usd += price.per_call * calls
    return usd_to_units(usd)


def _rate(rate: Decimal | None, what: str) -> Decimal:
    if rate is None:
        raise InvalidRequest(f"this model is not priced {what}", param="model")
    return rate


def rerank_cost(price: Price, *, search_units: int = 0, tokens: int = 0) -> int:
    """Units for a rerank: per search unit where the model is sold so, else per token."""
    if price.per_search_unit is not None:
        return usd_to_units(price.per_search_unit * search_units)
    return usd_to_units(_rate(price.rerank_per_million, "for reranking") * tokens / MILLION)


def moderation_cost(price: Price, inputs: int) -> int:
    """Units for a moderation of `inputs` items (free unless the operator priced it)."""
    return usd_to_units(_rate(price.per_moderation, "for moderation") * inputs)


def speech_cost(price: Price, *, characters: int = 0, input_tokens: int = 0, audio_tokens: int = 0) -> int:
    """Units for speech: per input character where sold so, else per text and audio token."""
    if price.per_million_characters is not None:
        return usd_to_units(price.per_million_characters * characters / MILLION)
    audio = _rate(price.audio_output_per_million, "for speech")
    return usd_to_units((audio * audio_tokens + (price.input_per_million or 0) * input_tokens) / MILLION)


def transcription_cost(price: Price, *, seconds: Decimal | int = 0, audio_tokens: int = 0, text_tokens: int = 0,
                       output_tokens: int = 0) -> int:
    """Units for a transcription or translation: per second of audio where sold so, else per token
    (audio heard, prompt text, text written)."""
    if price.per_audio_second is not None:
        return usd_to_units(price.per_audio_second * Decimal(seconds))
    audio = _rate(price.audio_input_per_million, "for transcription")
    return usd_to_units((audio * audio_tokens + (price.input_per_million or 0) * text_tokens
                         + (price.output_per_million or 0) * output_tokens) / MILLION)
