"""Delta request rules (`POST /v1/video/generations` with a `delta-*` model): every row of the spec's tables.

`billable_seconds` and `sample_count` say what billing prices; `upstream_body()` is what the
adapter relays. Rules that depend on the model id run after the fields are parsed, but still name
the field they are about (`instances[0].lastFrame: ...`), because a 400 that names no field is a guess.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr, field_validator, model_validator

from gateway.schemas.shared import Base64, MimeType, Problems, Prompt, StrictBody

#: Every delta model id and its generation ("2", "3.0" or "3.1").
DELTA_MODELS: dict[str, str] = {
    "delta-2.0-generate-001": "2",
    "delta-2.0-generate-preview": "2",  # named only by the feature table (mask)
    "delta-2.0-generate-exp": "2",  # named only by the feature table (referenceImages)
    "delta-3.0-generate-001": "3.0",
    "delta-3.0-fast-generate-001": "3.0",
    "delta-3.0-generate-preview": "3.0",
    "delta-3.0-fast-generate-preview": "3.0",
    "delta-3.1-generate-preview": "3.1",
    "delta-3.1-fast-generate-preview": "3.1",
    "delta-3.1-generate-001": "3.1",
    "delta-3.1-fast-generate-001": "3.1",
}
_DELTA_GEN_31 = {model for model, gen in DELTA_MODELS.items() if gen == "3.1"}

#: The spec's feature table: the exact model ids that take each optional media input.
#: `prompt` and `image` are taken by every model.
DELTA_MEDIA_SUPPORT: dict[str, frozenset[str]] = {
    "image": frozenset(DELTA_MODELS),
    "lastFrame": frozenset({"delta-2.0-generate-001", *_DELTA_GEN_31}),
    "video": frozenset({"delta-2.0-generate-001"}),
    "mask": frozenset({"delta-2.0-generate-preview"}),
    "referenceImages": frozenset({"delta-2.0-generate-exp", "delta-3.1-generate-preview"}),
}
# The kind of media each input must be (its mimeType's top-level type).
_DELTA_MEDIA_KIND = {"image": "image", "lastFrame": "image", "video": "video", "mask": "image",
                     "referenceImages": "image"}


class DeltaMedia(StrictBody):
    """Flat base64 media: `{bytesBase64Encoded, mimeType}`."""

    bytesBase64Encoded: Base64
    mimeType: MimeType

    @model_validator(mode="before")
    @classmethod
    def _flat_base64_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            # The upstream answers the nested form with "image is empty"; the spec keeps its words.
            nested = next((key for key in ("inlineData", "inline_data") if key in data), None)
            if nested:
                raise ValueError(f"image is empty: the nested {nested} form is not accepted; "
                                 "send the flat form {bytesBase64Encoded, mimeType}")
            stored = next((key for key in ("gcsUri", "uri", "storageUri") if key in data), None)
            if stored:
                raise ValueError(f"{stored} is not supported: storage-URI media is not accepted; "
                                 "send the media inline as bytesBase64Encoded")
        return data



class DeltaInstance(StrictBody):
    prompt: Prompt
    image: DeltaMedia | None = None
    lastFrame: DeltaMedia | None = None
    video: DeltaMedia | None = None
    mask: DeltaMedia | None = None
    referenceImages: list[DeltaMedia] | None = Field(None, min_length=1)


class DeltaParameters(StrictBody):
    durationSeconds: StrictInt
    generateAudio: StrictBool | None = None
    enhancePrompt: StrictBool | None = None
    aspectRatio: Literal["16:9", "9:16", "1:1"] | None = None
    negativePrompt: StrictStr | None = None
    resizeMode: Literal["pad", "crop"] | None = None
    resolution: Literal["720p", "1080p"] | None = None
    personGeneration: Literal["allow_adult", "dont_allow"] | None = None
    sampleCount: StrictInt | None = Field(None, ge=1, le=4)
    seed: StrictInt | None = Field(None, ge=0, le=4294967295)

    @model_validator(mode="before")
    @classmethod
    def _no_storage(cls, data: Any) -> Any:
        if isinstance(data, dict) and "storageUri" in data:
            raise ValueError("storageUri is not supported: results are fetched through the gateway")
        return data


class DeltaVideoRequest(StrictBody):
    """`POST /v1/video/generations` with a `delta-*` model."""

    model: StrictStr
    instances: list[DeltaInstance] = Field(min_length=1)
    parameters: DeltaParameters

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in DELTA_MODELS:
            raise ValueError(f"{value!r} is not a delta model; use one of {', '.join(DELTA_MODELS)}")
        return value

    @property
    def generation(self) -> str:
        return DELTA_MODELS[self.model]

    @model_validator(mode="after")
    def _model_rules(self) -> DeltaVideoRequest:
        problems = Problems(type(self).__name__)
        gen, params = self.generation, self.parameters
        for index, instance in enumerate(self.instances):
            for field, allowed in DELTA_MEDIA_SUPPORT.items():
                value = getattr(instance, field)
                if value is None:
                    continue
                loc: tuple[str | int, ...] = ("instances", index, field)
                if self.model not in allowed:
                    problems.add(loc, f"is not supported by {self.model}; models that take it: "
                                      f"{', '.join(sorted(allowed))}")
                    continue
                kind = _DELTA_MEDIA_KIND[field]
                for at, media in ([(loc, value)] if isinstance(value, DeltaMedia)
                                  else [(loc + (i,), item) for i, item in enumerate(value)]):
                    if media.mimeType.split("/")[0] != kind:
                        problems.add(at + ("mimeType",), f"must be {kind}/* for {field}",
                                     media.mimeType)
            if instance.lastFrame is not None and instance.image is None:
                problems.add(("instances", index, "lastFrame"), "needs image (the first frame) as well")

        if gen == "2":
            if not 5 <= params.durationSeconds <= 8:
                problems.add(("parameters", "durationSeconds"),
                             f"must be 5 to 8 for generation 2 models ({self.model})", params.durationSeconds)
        elif params.durationSeconds not in (4, 6, 8):
            problems.add(("parameters", "durationSeconds"),
                         f"must be 4, 6 or 8 for generation {gen} models ({self.model})", params.durationSeconds)
        if gen != "2" and params.generateAudio is None:
            problems.add(("parameters", "generateAudio"), f"is required for generation {gen} models ({self.model})")
        if gen != "2" and params.enhancePrompt is not None:
            problems.add(("parameters", "enhancePrompt"), "is supported by generation 2 models only",
                         params.enhancePrompt)
        if gen == "2" and params.resolution is not None:
            problems.add(("parameters", "resolution"), "is supported by generation 3 and 3.1 models only",
                         params.resolution)
        if params.resizeMode is not None:
            if gen == "2":
                problems.add(("parameters", "resizeMode"), "is supported by generation 3 models only",
                             params.resizeMode)
            elif not any(instance.image is not None for instance in self.instances):
                problems.add(("parameters", "resizeMode"), "applies to image-to-video only: give instances[].image",
                             params.resizeMode)
        problems.raise_if_any()
        return self

    @property
    def sample_count(self) -> int:
        """Videos produced: sampleCount per instance (the upstream makes one set per instance)."""
        return (self.parameters.sampleCount or 1) * len(self.instances)

    @property
    def billable_seconds(self) -> int:
        return self.parameters.durationSeconds * self.sample_count

    def upstream_body(self) -> dict[str, Any]:
        """`{instances, parameters}`: the model travels in the upstream path, not the body."""
        return self.model_dump(include={"instances", "parameters"}, exclude_none=True)
