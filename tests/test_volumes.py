"""Profile volumes: checked when the profile is set, expanded for the user at submit (``volumes.py``)."""

from __future__ import annotations

import pytest

from jupyter_quota import volumes
from jupyter_quota.errors import InvalidRequest
from jupyter_quota.profiles import TeamProfile

HOME = {"name": "home", "mountPath": "/home/jovyan", "persistentVolumeClaim": {"claimName": "claim-{username}"}}
SHARED = {
    "name": "shared",
    "mountPath": "/shared",
    "readOnly": True,
    "persistentVolumeClaim": {"claimName": "alpha-shared"},
}


def test_a_home_claim_expands_to_the_users_own_claim():
    [home, shared] = volumes.for_user([HOME, SHARED], "ann")
    assert home["persistentVolumeClaim"] == {"claimName": "claim-ann"}
    assert volumes.split(home) == (
        {"name": "home", "persistentVolumeClaim": {"claimName": "claim-ann"}},
        {"name": "home", "mountPath": "/home/jovyan"},
    )
    assert volumes.split(shared)[1] == {"name": "shared", "mountPath": "/shared", "readOnly": True}
    assert HOME["persistentVolumeClaim"]["claimName"] == "claim-{username}"  # the profile is not changed


def test_a_profile_with_volumes_is_valid_and_keeps_them():
    profile = TeamProfile(team="alpha", volumes=[HOME, SHARED])
    assert profile.to_json()["volumes"] == [HOME, SHARED]


@pytest.mark.parametrize(
    "entry, words",
    [
        (
            {**HOME, "name": "Home_Dir"},
            'volumes[0].name: Invalid value: "Home_Dir": a volume name must be a DNS-1123 label',
        ),
        (
            {**HOME, "mountPath": "home/jovyan"},
            'volumes[0].mountPath: Invalid value: "home/jovyan": must be an absolute path',
        ),
        ({k: v for k, v in HOME.items() if k != "mountPath"}, "volumes[0].mountPath: Invalid value: "),
        ({**HOME, "subPath": "../other"}, 'volumes[0].subPath: Invalid value: "../other": must be a relative path'),
        ({**HOME, "readOnly": "yes"}, "volumes[0].readOnly must be true or false"),
        ({**HOME, "nfs": {"server": "nfs", "path": "/x"}}, "must name exactly one volume source object"),
        ({"name": "home", "mountPath": "/home"}, "it has none"),
        ({**HOME, "persistentVolumeClaim": {"claimName": "claim-{user}"}}, "may hold only the placeholder {username}"),
        (
            {**HOME, "persistentVolumeClaim": {"claimName": "Claim-{username}"}},
            """for user 'user' it is "Claim-user", which is not a PersistentVolumeClaim name""",
        ),
    ],
)
def test_a_bad_volume_is_refused_with_the_field_and_the_rule(entry, words):
    with pytest.raises(InvalidRequest) as refused:
        TeamProfile(team="alpha", volumes=[entry])
    assert refused.value.status == 400
    assert words in refused.value.message, refused.value.message
    assert refused.value.message.startswith("profile 'alpha': ")


def test_a_volume_that_is_not_an_object_is_refused():
    with pytest.raises(InvalidRequest, match=r"volumes\[0\] must be an object, e\.g\. "):
        volumes.check(["home"])
    with pytest.raises(InvalidRequest, match="expected a dict, not the str 'home'"):  # traitlets says it first
        TeamProfile(team="alpha", volumes=["home"])


def test_two_volumes_of_one_name_are_refused():
    with pytest.raises(InvalidRequest, match=r'volumes\[1\]\.name: Duplicate value: "home"'):
        TeamProfile(team="alpha", volumes=[HOME, {**SHARED, "name": "home"}])


def test_a_user_whose_name_makes_no_claim_name_gets_a_400_at_submit():
    with pytest.raises(InvalidRequest) as refused:
        volumes.for_user([HOME], "Ann.Smith@example.org")
    assert "for user 'Ann.Smith@example.org' it is \"claim-Ann.Smith@example.org\"" in refused.value.message
