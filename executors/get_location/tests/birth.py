def birth_the_configured_place_with_its_coordinates(run, tmp):
    out = run({}, config={"location": {"name": "Milan, Italy", "lat": 45.4642, "lon": 9.19}})
    assert out["ok"] is True, out
    assert out["location"] == {"name": "Milan, Italy", "lat": 45.4642, "lon": 9.19}
    assert out["content"] == "Milan, Italy (45.4642, 9.19)"


def birth_a_name_alone_or_coordinates_alone(run, tmp):
    named = run({}, config={"location": {"name": "Bologna", "lat": None, "lon": None}})
    assert named["ok"] is True and named["location"] == {"name": "Bologna", "lat": None, "lon": None}
    placed = run({}, config={"location": {"name": "", "lat": 44.49, "lon": 11.34}})
    assert placed["ok"] is True and placed["content"] == "44.49, 11.34"


def birth_no_location_is_said_never_guessed(run, tmp):
    for config in ({"location": {"name": "  ", "lat": None, "lon": None}}, {}):
        out = run({}, config=config)
        assert out["ok"] is False, out
        assert out["error"]["class"] == "NoLocation"
        assert "request_location_from_user" in out["hint"]
