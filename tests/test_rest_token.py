"""The minter's HS256 JWTs: RFC 7515's own HS256 example, Slurm's claims, and refusals before anything is signed."""

from __future__ import annotations

import base64
import json

import pytest

from hyperpod_cdk.rest.minter import token
from hyperpod_cdk.rest.minter.token import TokenError, claims, mint, verify

KEY = b"k" * 64


def _part(text: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def test_the_signature_is_rfc7515_appendix_a1s_hs256_example():
    # RFC 7515 A.1: the JWK's "k", the signing input and the signature it gives, as the RFC prints them
    key = base64.urlsafe_b64decode(
        "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow=="
    )
    signing_input = (
        "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
        ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    )
    assert token._signature(key, signing_input) == "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"


def test_a_minted_token_carries_slurms_claims_and_hs256():
    jwt = mint(KEY, "alice", 900, 1_700_000_000)  # an injected clock: mint and verify take `now`
    header, payload, signature = jwt.split(".")
    assert _part(header) == {"alg": "HS256", "typ": "JWT"}
    assert _part(payload) == {"iat": 1_700_000_000, "exp": 1_700_000_900, "sun": "alice"}  # injected
    assert "=" not in jwt
    assert token._signature(KEY, header + "." + payload) == signature
    assert verify(KEY, jwt, 1_700_000_899)["sun"] == "alice"  # injected clock


def test_verify_refuses_another_key_an_expired_token_and_a_changed_user():
    jwt = mint(KEY, "alice", 60, 1000)
    with pytest.raises(TokenError, match="signature"):
        verify(b"other", jwt, 1001)
    with pytest.raises(TokenError, match="expired"):
        verify(KEY, jwt, 1060)
    header, _, signature = jwt.split(".")
    forged = header + "." + mint(KEY, "root", 60, 1000).split(".")[1] + "." + signature
    with pytest.raises(TokenError, match="signature"):
        verify(KEY, forged, 1001)


@pytest.mark.parametrize(
    "key, user, lifetime, now, fragment",
    [
        (b"", "alice", 60, 0, "key is empty"),
        (KEY, "-alice", 60, 0, "POSIX user name"),
        (KEY, "al ice", 60, 0, "POSIX user name"),
        (KEY, "", 60, 0, "POSIX user name"),
        (KEY, "alice", 0, 0, "lifetime_s"),
        (KEY, "alice", token.MAX_LIFETIME_S + 1, 0, "lifetime_s"),
        (KEY, "alice", True, 0, "lifetime_s"),
        (KEY, "alice", 60, -1, "Unix time"),
    ],
)
def test_mint_refuses_bad_input(key, user, lifetime, now, fragment):
    with pytest.raises(TokenError, match=fragment):
        mint(key, user, lifetime, now)


def test_claims_reads_without_the_key_and_refuses_what_is_not_a_jwt():
    assert claims(mint(KEY, "bob", 30, 5))["exp"] == 35
    with pytest.raises(TokenError):
        claims("not-a-token")
