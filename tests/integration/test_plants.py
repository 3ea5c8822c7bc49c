import json

import pytest

from tests.conftest import api_event, load_function


@pytest.fixture(scope="module")
def plants_fn(aws):
    return load_function("plants")


def call(fn, ctx, body, headers=None):
    answer = fn.lambda_handler(api_event("POST", "/plants", body=body, headers=headers), ctx)
    return answer["statusCode"], json.loads(answer["body"])


def test_a_new_plant_is_stored_and_answered_as_a_plant(plants_fn, demo, lambda_context):
    auth = {"Authorization": f"Bearer {demo['key']}"}
    assert call(plants_fn, lambda_context, '{"id": 1, "name": "fern"}', auth) == (200, {"name": "fern"})
    assert call(plants_fn, lambda_context, '{"id": 2, "name": "ivy", "tag": "climber"}', auth) == (
        200, {"name": "ivy", "tag": "climber"})
    from gateway.store.plants import PlantsRepository
    assert PlantsRepository().get(2).tag == "climber"


@pytest.mark.parametrize("body,needle", [
    ("not json", "not valid JSON"),
    ("", "required"),
    ('{"name": "fern"}', "id: is required"),
    ('{"id": 1}', "name: is required"),
    ('{"id": "1", "name": "fern"}', "id: Input should be a valid integer"),
    ('{"id": 1.5, "name": "fern"}', "id: Input should be a valid integer"),
    ('{"id": 9223372036854775808, "name": "fern"}', "id: Input should be less than or equal to 9223372036854775807"),
    ('{"id": 1, "name": 5}', "name: Input should be a valid string"),
    ('{"id": 1, "name": "fern", "tag": 3}', "tag: Input should be a valid string"),
    ('[{"id": 1, "name": "fern"}]', "JSON object"),
])
def test_an_invalid_body_gets_400_in_the_error_shape_and_stores_nothing(plants_fn, demo, lambda_context, body, needle):
    status, answer = call(plants_fn, lambda_context, body, {"Authorization": f"Bearer {demo['key']}"})
    assert status == 400 and answer["error"] == 400 and needle in answer["message"]
    from gateway.store.plants import PlantsRepository
    assert PlantsRepository().get(1) is None


def test_an_unknown_content_type_is_refused(plants_fn, demo, lambda_context):
    status, answer = call(plants_fn, lambda_context, '{"id": 1, "name": "fern"}',
                          {"Authorization": f"Bearer {demo['key']}", "Content-Type": "text/xml"})
    assert status == 400 and "Content-Type" in answer["message"]


def test_a_duplicate_id_is_a_conflict_and_keeps_the_first_plant(plants_fn, demo, lambda_context):
    auth = {"Authorization": f"Bearer {demo['key']}"}
    call(plants_fn, lambda_context, '{"id": 5, "name": "fern"}', auth)
    status, answer = call(plants_fn, lambda_context, '{"id": 5, "name": "moss"}', auth)
    assert status == 409 and answer == {"error": 409, "message": "id: a plant with id 5 already exists"}


def test_no_key_gets_401_in_the_error_shape(plants_fn, store, lambda_context):
    status, answer = call(plants_fn, lambda_context, '{"id": 1, "name": "fern"}', {})
    assert status == 401 and answer["error"] == 401
