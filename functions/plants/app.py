"""POST /plants: the sample plant store."""

from aws_lambda_powertools.logging import correlation_paths

from gateway import observability
from gateway.errors import InvalidRequest
from gateway.http import authenticate, body_model, create_app, json_response
from gateway.schemas.plants import NewPlant
from gateway.store.plants import PlantsRepository

app = create_app()
plants = PlantsRepository()

# JSON, or curl's default form type carrying a JSON body (`curl -d '{...}'`).
_ACCEPTED_TYPES = ("application/json", "application/x-www-form-urlencoded")


@app.post("/plants")
def create_plant():
    principal = authenticate(app)
    content_type = (app.current_event.headers.get("content-type") or "application/json").split(";")[0].strip().lower()
    if content_type not in _ACCEPTED_TYPES and not content_type.endswith("+json"):
        raise InvalidRequest(f"Content-Type: '{content_type}' is not supported; send application/json")
    plant = plants.create(body_model(app, NewPlant), owner_id=principal.user_id)
    return json_response(plant)


@observability.lambda_handler(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return app.resolve(event, context)
