"""``[location]`` in config.toml: where the user is, as get_location returns it.

```toml
[location]
name = "Milan, Italy"   # a town or an address, in words
lat = 45.4642           # optional, with lon
lon = 9.19
```

Unset (no name and no coordinates), get_location says there is no location and the planner
asks the user (request_location_from_user, seeds/002 ch. 11.2.2).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from metnos.settings.declare import setting


class LocationSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = setting("", "Where the user is, in words (a town, an address): what get_location returns. Empty with no "
                            "coordinates: no location, and a location-relative request asks the user.", max_length=200)
    lat: float | None = setting(None, "The latitude of that place, in degrees (-90 to 90); set with lon.", ge=-90, le=90)
    lon: float | None = setting(None, "The longitude of that place, in degrees (-180 to 180); set with lat.", ge=-180, le=180)

    @model_validator(mode="after")
    def _both_coordinates(self) -> LocationSettings:
        if (self.lat is None) != (self.lon is None):
            raise ValueError("set both lat and lon, or neither")
        return self

    def executor_config(self) -> dict[str, Any]:
        """What get_location reads from ctx.config."""
        return {"location": {"name": self.name.strip(), "lat": self.lat, "lon": self.lon}}
