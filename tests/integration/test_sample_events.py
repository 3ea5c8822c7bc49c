"""The sample events of events/ are realistic enough to drive their functions (`sam local invoke -e`)."""

import json

import pytest

from tests.conftest import EVENTS, load_function


@pytest.mark.parametrize("function,event_file", [("plants", "plants.json"), ("account", "account.json"),
                                                 ("console", "console.json"), ("commerce", "commerce.json")])
def test_each_sample_event_is_answered_by_its_function(demo, lambda_context, function, event_file):
    event = json.loads((EVENTS / event_file).read_text())
    answer = load_function(function).lambda_handler(event, lambda_context)
    assert answer["statusCode"] == 200, answer["body"]
