"""get_location: the user's place as the instance is set up with it ([location] in config.toml), never a guess."""


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run(args, ctx):
    given = (ctx.get("config") or {}).get("location") or {}
    name = str(given.get("name") or "").strip()
    lat, lon = _number(given.get("lat")), _number(given.get("lon"))
    if lat is None or lon is None:
        lat = lon = None
    if not name and lat is None:
        return {
            "ok": False,
            "error": {"class": "NoLocation", "message": "no location is set: [location] name (and lat, lon) in config.toml"},
            "hint": "for a request that depends on where the user is, ask with request_location_from_user; never guess a place",
        }
    shown = name or f"{lat}, {lon}"
    if name and lat is not None:
        shown = f"{name} ({lat}, {lon})"
    return {"ok": True, "content": shown, "location": {"name": name, "lat": lat, "lon": lon}}
