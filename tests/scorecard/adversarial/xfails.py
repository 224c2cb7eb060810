"""The adversarial cases the scorecard does not yet score right, with the issue's reason.

Each runs as ``pytest.mark.xfail(strict=True)``: the moment the scorecard gets it right the
suite fails until its line here is removed. Keys are case ids (``claimNN-name``); values say
which issue-33 failure class the case belongs to. Empty: every case is scored right.
"""

KNOWN: dict[str, str] = {}
