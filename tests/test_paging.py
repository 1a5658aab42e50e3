"""Paging of list answers (``jupyter_quota.paging``): tokens, limits, the answer's metadata."""

from __future__ import annotations

import base64

import pytest

from jupyter_quota import paging
from jupyter_quota.errors import InvalidRequest


def test_a_token_is_kube_apiservers_encoding_and_round_trips():
    token = paging.encode("42")
    assert "=" not in token and "/" not in token and "+" not in token  # base64url, unpadded
    assert base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)) == b'{"v":"meta.k8s.io/v1","start":"42"}'
    assert paging.decode(token) == "42"
    assert paging.decode(None) is None and paging.decode("") is None


@pytest.mark.parametrize(
    "token, detail",
    [
        ("!!!", "continue key is not valid"),
        (base64.urlsafe_b64encode(b"[1]").decode(), "server does not recognize this encoded version"),
        (base64.urlsafe_b64encode(b'{"v":"x/v9","start":"1"}').decode(), "encoded version x/v9"),
        (base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","start":""}').decode(), "encoded start key empty"),
        (base64.urlsafe_b64encode(b"[" * 100_000).decode(), "continue key is not valid"),
    ],
)
def test_a_token_that_cannot_be_decoded_is_a_400_in_kube_apiservers_words(token, detail):
    with pytest.raises(InvalidRequest) as refused:
        paging.decode(token)
    assert refused.value.status == 400
    assert refused.value.message.startswith("invalid continue token: continue key is not valid")
    assert detail in refused.value.message


@pytest.mark.parametrize("raw, size", [(None, 100), ("", 100), ("1", 1), ("1000", 1000), ("25", 25)])
def test_limit_defaults_to_the_servers_page_size(raw, size):
    assert paging.parse_limit(raw, 100) == size


# the last: full-width digits, which str.isdigit() accepts and int() reads as 12
@pytest.mark.parametrize("raw", ["0", "-1", "1001", "abc", "1.5", "9" * 5000, "１２"])  # noqa: RUF001
def test_a_limit_out_of_range_is_a_400_that_says_the_range(raw):
    with pytest.raises(InvalidRequest, match="limit must be a whole number from 1 to 1000") as refused:
        paging.parse_limit(raw, 100)
    assert len(refused.value.message) < 200


def test_the_answer_carries_list_meta_and_nothing_on_the_last_page():
    middle = paging.list_json("jobs", paging.Page([{"name": "b"}], "7", 3))
    assert middle["jobs"] == [{"name": "b"}]
    assert paging.decode(middle["metadata"]["continue"]) == "7"
    assert middle["metadata"]["remainingItemCount"] == 3
    assert paging.list_json("jobs", paging.Page([])) == {"jobs": [], "metadata": {}}
