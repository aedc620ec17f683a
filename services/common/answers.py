"""Checking an answer's ``data`` against the model its contract gives it (services/*/contract.py)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from services.common.codes import ResponseCode
from services.common.errors import RemoteError

M = TypeVar("M", bound=BaseModel)


class View(BaseModel):
    """A status view: the fields clients read are checked, every other one is kept as it came. Its fields are
    declared in the order our servers send them, so :meth:`shown` gives the view back as it was served."""

    model_config = ConfigDict(extra="allow", strict=True)

    def shown(self) -> dict[str, Any]:
        """The view as it came (no field added that the answer did not have)."""
        return self.model_dump(exclude_unset=True)


def checked(model: type[M], data: Any, who: str) -> M:
    """``data`` as ``model``; an answer that breaks the contract is a RemoteError (SYSTEM_ERROR) naming ``who``
    answered and the first fields that are wrong, not a KeyError somewhere later."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'data'}: {e['msg']}" for e in exc.errors()[:3])
        raise RemoteError(int(ResponseCode.SYSTEM_ERROR),
                          f"{who}'s answer is malformed ({model.__name__}: {problem})") from None
