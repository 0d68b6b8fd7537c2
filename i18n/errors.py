"""An input error in the reader's language: planner.request.PlanError carries the field, the value and what is
allowed (in the planner's English); the field's name is translated through the catalogue ('field:<name>'), the
allowed text where the catalogue holds it ('known:<text>'), and the value is shown as it was given."""

from __future__ import annotations

from i18n import field_name, language, tr, tr_known
from planner.request import PlanError


def error_text(exc: BaseException) -> str:
    """What to show a user for `exc`: a PlanError in the reader's language, any other error's own message."""
    if isinstance(exc, PlanError) and language() != "en":
        return tr("{field} = {value} is not allowed: {allowed}", field=field_name(exc.field), value=repr(exc.value),
                  allowed=tr_known(exc.allowed))
    return str(exc)
