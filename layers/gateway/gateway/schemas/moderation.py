"""The request model of `POST /v1/moderations`, OpenAI's `CreateModerationRequest`
(openai-openapi `openapi.yaml` `CreateModerationRequest`; SDK `types/moderation_create_params.py`,
`moderation_multi_modal_input_param.py`): `input` a string, an array of strings, or an array of
`{type: text, text}` and `{type: image_url, image_url: {url}}` (a URL or a base64 data URL);
`model` optional, `omni-moderation-latest` by default."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from gateway.schemas.shared import HttpOrDataUrl, StrictBody
from gateway.schemas.text.shapes import ModelName, Str, by_shape
from gateway.tokens import estimate_tokens

DEFAULT_MODEL = "omni-moderation-latest"
# More inputs than any moderation upstream takes in one call (the embeddings route's bound).
MAX_INPUTS = 2048


class ImageUrl(StrictBody):
    url: HttpOrDataUrl


class TextPart(StrictBody):
    type: Literal["text"]
    text: Str


class ImagePart(StrictBody):
    type: Literal["image_url"]
    image_url: ImageUrl


Part = Annotated[TextPart | ImagePart, Field(discriminator="type")]


def _choose_input(value: Any) -> Any:
    if isinstance(value, str):
        return Str
    if not isinstance(value, list) or not value:
        return None
    many = Field(min_length=1, max_length=MAX_INPUTS)
    if all(isinstance(item, str) for item in value):
        return Annotated[list[Str], many]
    if all(isinstance(item, dict) for item in value):
        return Annotated[list[Part], many]
    return None


class ModerationRequest(StrictBody):
    model: ModelName = DEFAULT_MODEL
    input: Annotated[Any, by_shape(_choose_input, "must be a string, an array of strings or an array of "
                                                  "text and image_url parts")]

    def count(self) -> int:
        """The items moderated (each string or part: OpenAI answers one result per input)."""
        return 1 if isinstance(self.input, str) else len(self.input)

    def estimate_tokens(self) -> int:
        items = [self.input] if isinstance(self.input, str) else self.input
        return sum(estimate_tokens(item) if isinstance(item, str) else
                   estimate_tokens(item.text) if isinstance(item, TextPart) else 0 for item in items)
