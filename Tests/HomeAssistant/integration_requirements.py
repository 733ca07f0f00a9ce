#!/usr/bin/env python3
"""Prints the pip requirements of the Home Assistant integrations make test-homeassistant loads.

Usage (in a venv where the homeassistant package is installed):
    integration_requirements.py
Home Assistant started with --skip-pip installs nothing, so every integration it sets up must find
its requirements installed. Those are the requirement lists of the manifests
(homeassistant/components/*/manifest.json) of the integrations the lane sets up, with every
integration their `dependencies` pull in: what configuration.yaml names, what Home Assistant's
bootstrap always sets up, and what the lane adds through config flows. Used when moving the lane
to another Home Assistant version: install these with -c package_constraints.txt, then pin the
venv's pip freeze in requirements.txt.
"""
import json
import pathlib

import homeassistant
from homeassistant import bootstrap

# configuration.yaml of the lane (homeassistant_lane.py) and the config flows it drives.
LANE = {"http", "api", "config", "onboarding", "diagnostics", "logger", "esphome", "bthome", "bluetooth",
        "websocket_api", "auth", "mqtt", "sensor", "mqtt_room"}
ALWAYS = (bootstrap.CORE_INTEGRATIONS | bootstrap.LOGGING_AND_HTTP_DEPS_INTEGRATIONS
          | bootstrap.DEFAULT_INTEGRATIONS) - {"sentry"}


def closure(domains, components):
    seen, todo, requirements = set(), list(domains), {}
    while todo:
        domain = todo.pop()
        if domain in seen:
            continue
        seen.add(domain)
        manifest = json.loads((components / domain / "manifest.json").read_text())
        for requirement in manifest.get("requirements", []):
            requirements.setdefault(requirement, domain)
        todo += manifest.get("dependencies", [])
    return seen, requirements


def main():
    components = pathlib.Path(homeassistant.__file__).parent / "components"
    domains, requirements = closure(LANE | ALWAYS, components)
    print(f"# {len(domains)} integrations: {' '.join(sorted(domains))}")
    for requirement, domain in sorted(requirements.items(), key=lambda item: item[0].lower()):
        print(f"{requirement}  # {domain}")


main()
