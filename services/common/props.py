"""RocketMQ-style ``.properties`` / ``.conf`` files: ``key = value`` lines, ``#`` or ``!`` comments."""

from __future__ import annotations

from pathlib import Path

from services.common.errors import ConfigError


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Java's ``Properties.load`` reading, which RocketMQ uses for its .conf files: a key ends at the first
    ``=``, ``:`` or whitespace; after whitespace one ``=`` or ``:`` may follow; the rest is the value. A
    line that is only a key has the value "". (Backslash escapes and continued lines are not read.)"""
    result: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, value = _split_line(line)
        if not key:
            raise ConfigError(f"{source}:{number}: empty property name")
        result[key] = value
    return result


def _split_line(line: str) -> tuple[str, str]:
    end = next((i for i, c in enumerate(line) if c in _SEPARATORS), len(line))
    key, rest = line[:end], line[end:]
    if rest[:1] in ("=", ":"):
        rest = rest[1:]
    else:  # ended at whitespace (or the line): one '=' or ':' may still come
        rest = rest.lstrip(_BLANKS)
        if rest[:1] in ("=", ":"):
            rest = rest[1:]
    return key, rest.strip()


_BLANKS = " \t\f"
_SEPARATORS = "=:" + _BLANKS


def load_properties(path: str | Path) -> dict[str, str]:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {file} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from exc
    return parse_properties(text, source=str(file))


def format_properties(values: dict[str, object]) -> str:
    return "".join(f"{key}={_fmt(value)}\n" for key, value in values.items())


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def to_bool(value: str, key: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"property {key} must be true or false, got {value!r}")


def to_int(value: str, key: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"property {key} must be an integer, got {value!r}") from None
