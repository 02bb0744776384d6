"""The operator's list of OpenAI-compatible endpoints: a JSON file named by RAQA_ENDPOINTS (AppConfig.endpoints).

    [{"name": "Llama 3.1 8B (vLLM)", "base_url": "http://localhost:8000/v1",
      "model": "meta-llama/Llama-3.1-8B-Instruct", "api_key_env": "VLLM_KEY"}]

name, base_url and model are required; every other EndpointConfig field is optional. `"public": true` offers an
endpoint to the visitors of a public page (a Space, RAQA_PUBLIC=1); without it a public page does not list it. The file holds the
*name* of the environment variable with each key, never a key. Without RAQA_ENDPOINTS nothing is configured.

Left out: reading the environment (config.py does that), building the backends (EndpointBackend(config) does that,
and gets the key through config.secret) and choosing among them in the page (the service and UI do that).
"""

from __future__ import annotations

import json
import re
from dataclasses import MISSING, fields
from pathlib import Path
from urllib.parse import urlsplit

from raqa.config import AppConfig
from raqa.models.endpoint import EndpointConfig

ENDPOINTS_ENV = "RAQA_ENDPOINTS"
READER_PREFIX = "endpoint:"  # a server is offered as the reader READER_PREFIX + its name
_FIELDS = {f.name: f for f in fields(EndpointConfig)}
_REQUIRED = [name for name, f in _FIELDS.items() if f.default is MISSING]
MAX_CONCURRENCY = 64  # questions one page's benchmark sends a server at once
_POSITIVE = ("timeout_s", "connect_timeout_s", "max_backoff_s", "deadline_s")


class EndpointConfigError(ValueError):
    """The endpoints file cannot be used; the message names the file, the entry and the field."""


def _check(entry: object, where: str) -> EndpointConfig:
    if not isinstance(entry, dict):
        raise EndpointConfigError(f"{where}: expected a JSON object, got {type(entry).__name__}.")
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise EndpointConfigError(f"{where}: unknown field {unknown[0]!r}. Choose from: {', '.join(_FIELDS)}.")
    for name in _REQUIRED:
        if not isinstance(entry.get(name), str) or not entry[name].strip():
            raise EndpointConfigError(f"{where}: field {name!r} is required and must be non-empty text.")
    url = urlsplit(entry["base_url"])
    if url.scheme not in ("http", "https") or not url.hostname:
        raise EndpointConfigError(f"{where}: field 'base_url' must be an http(s) URL, e.g. http://localhost:8000/v1.")
    if url.username or url.password or url.query:
        raise EndpointConfigError(
            f"{where}: field 'base_url' must not carry credentials or a query; name the key's variable in api_key_env."
        )
    key_env = entry.get("api_key_env")
    if key_env is not None and (not isinstance(key_env, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env)):
        raise EndpointConfigError(
            f"{where}: field 'api_key_env' must be the name of an environment variable (like VLLM_KEY), not a key."
        )
    for name in (*_POSITIVE, "backoff_s"):
        value = entry.get(name, 1)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or value < 0
            or (name in _POSITIVE and not value)
        ):
            least = "above 0" if name in _POSITIVE else "0 or more"
            raise EndpointConfigError(f"{where}: field {name!r} must be a number of seconds {least}, got {value!r}.")
    if not isinstance(entry.get("public", False), bool):
        raise EndpointConfigError(f"{where}: field 'public' must be true or false, got {entry['public']!r}.")
    for name, least in (("retries", 0), ("context_tokens", 256), ("concurrency", 1)):
        value = entry.get(name, least)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise EndpointConfigError(
                f"{where}: field {name!r} must be a whole number of {least} or more, got {value!r}."
            )
    if entry.get("concurrency", 1) > MAX_CONCURRENCY:
        raise EndpointConfigError(
            f"{where}: field 'concurrency' must be at most {MAX_CONCURRENCY}, got {entry['concurrency']!r}."
        )
    return EndpointConfig(**{**entry, "name": entry["name"].strip()})


def load_endpoints(path: str | Path) -> list[EndpointConfig]:
    """The endpoints listed in a JSON file, in order; raises EndpointConfigError naming the file and field.

    Example:
        load_endpoints("endpoints.json")[0].name  ->  "Llama 3.1 8B (vLLM)"
    """
    path = Path(path)
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EndpointConfigError(f"{path}: no such endpoints file (set by {ENDPOINTS_ENV}).") from None
    except (OSError, UnicodeDecodeError) as e:
        raise EndpointConfigError(f"{path}: cannot be read ({e}).") from None
    except ValueError as e:
        raise EndpointConfigError(f"{path}: not valid JSON ({e}).") from None
    if not isinstance(entries, list) or not entries:
        raise EndpointConfigError(f"{path}: expected a non-empty JSON list of endpoints.")
    configs: list[EndpointConfig] = []
    for number, entry in enumerate(entries, start=1):
        label = f" ({entry['name']!r})" if isinstance(entry, dict) and isinstance(entry.get("name"), str) else ""
        config = _check(entry, f"{path}, endpoint {number}{label}")
        if any(c.name == config.name for c in configs):
            raise EndpointConfigError(f"{path}, endpoint {number}: the name {config.name!r} is used twice.")
        configs.append(config)
    return configs


def configured_endpoints(config: AppConfig) -> list[EndpointConfig]:
    """The endpoints of the file config.endpoints names (RAQA_ENDPOINTS), or none when it names none."""
    return load_endpoints(config.endpoints) if config.endpoints else []
