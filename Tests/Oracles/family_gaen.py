"""Google/Apple Exposure Notification (Theengs `GAEN_json.h`): service data 0xFD6F, 20 bytes:
Rolling Proximity Identifier (16) and Associated Encrypted Metadata (4), both random."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def gaen_frame(rng: random.Random) -> Frame:
    return Frame(address=random_address(rng), uuids=["fd6f"],
                 service={"fd6f": bytes(rng.randrange(256) for _ in range(20))})


FAMILIES = [Family("Exposure Notification", "theengsdecoder 2.5.0", gaen_frame, theengs_oracle(models={"GAEN"}))]
