"""The pure SASL core (protocol/security/): Kafka's SCRAM credentials and the per-connection
SaslServer, driven by scramp's client and by hand-made and random messages."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
import scramp
from hypothesis import given, settings, strategies as st

from protocol.security.credentials import (MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS,
                                           ScramCredential, decode_credential,
                                           decode_user_config, encode_credential,
                                           encode_user_config, make_credential,
                                           verify_password)
from protocol.security.sasl import (AuthenticateResult, HandshakeResult, SaslServer)

pytestmark = pytest.mark.unit

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, PRODUCE, METADATA = 18, 17, 36, 0, 3
ALL = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
GENERIC = ("Authentication failed during authentication due to invalid credentials with "
           "SASL mechanism {}")
AUTHZID = ("Authentication failed: Client requested an authorization id that is different "
           "from username")
PLAIN_INVALID = "Authentication failed: Invalid username or password"
SALT = b"1l0ubjr0gre0w6537hcj6wqs"      # Kafka's salts are base-36 strings like this one

# RFC 7677 §3's SCRAM-SHA-256 exchange: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

# The credential above as Kafka's kafka-configs would write it (cross-checked with scramp below).
RFC_CREDENTIAL_TEXT = (
    "salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=,"
    "server_key=wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=,iterations=4096")

# /config/users/alice as Kafka writes it (password "alice-secret"), quota key included.
ALICE_ZNODE = (
    b'{"version":1,"config":{"producer_byte_rate":"1024",'
    b'"SCRAM-SHA-256":"salt=MWwwdWJqcjBncmUwdzY1MzdoY2o2d3Fz,'
    b'stored_key=uAiNO5WRkz1IRGy6UoGtKzvLWxcV8S4WUg85RIqGFAk=,'
    b'server_key=wq8M7lrkzgPEQ/Rm4AP5Z/H6zmlBQoh+Od8SQTluyDo=,iterations=4096",'
    b'"SCRAM-SHA-512":"salt=MWwwdWJqcjBncmUwdzY1MzdoY2o2d3Fz,'
    b'stored_key=aIo9l2RKmF9hoEkDTYbUEY8LmKgToJ4wXZdtX5OfaG1rx2Udd9m/kNY66H5Cf7C312xzJqLQ8IOSh3xPbHtYog==,'
    b'server_key=6gEuDvYtGbBY+T8hK2c8a1HdUah7k9uNJl6ZQG06+hLd1splQRFm9EvwKsk4I9XwwP/9gPDtQmxeWn3Es3zBQg==,'
    b'iterations=4096"}}')

PASSWORDS = {"alice": "alice-secret", "user": "pencil", "al,i=ce": "commas=equals"}
USERS = {(m, u): make_credential(m, pw, salt=RFC_SALT if u == "user" else SALT)
         for m in MECHANISMS for u, pw in PASSWORDS.items()}


def lookup(mechanism, username):
    return USERS.get((mechanism, username))


def server(enabled=ALL, lookup=lookup, **kw) -> SaslServer:
    return SaslServer(enabled, lookup, **kw)


def plain(authzid: str, user: str, password: str) -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


def in_state(state: str) -> SaslServer:
    s = server()
    if state == "handshake":
        assert s.allows(API_VERSIONS)
    elif state in ("authenticate", "complete"):
        assert s.process_handshake("PLAIN").error_code == 0
        if state == "complete":
            assert s.process_authenticate(plain("", "alice", "alice-secret")).error_code == 0
    elif state == "failed":
        assert s.process_handshake("GSSAPI").error_code == 33
    assert s.state == state
    return s


def scram_login(s: SaslServer, mechanism: str, user: str, password: str):
    """Run scramp's client against `s`; (first answer, final answer, client)."""
    client = scramp.ScramClient([mechanism], user, password)
    assert s.allows(API_VERSIONS) and s.allows(SASL_HANDSHAKE)
    assert s.process_handshake(mechanism) == HandshakeResult(0, ALL)
    assert s.allows(SASL_AUTHENTICATE)
    first = s.process_authenticate(client.get_client_first().encode())
    if first.error_code:
        return first, None, client
    client.set_server_first(first.auth_bytes.decode())
    assert s.allows(SASL_AUTHENTICATE)
    return first, s.process_authenticate(client.get_client_final().encode()), client


def assert_failed(r: AuthenticateResult, s: SaslServer, code=58, message=None):
    assert (r.error_code, r.auth_bytes, r.close, r.session_lifetime_ms) == (code, b"", True, 0)
    if message is not None:
        assert r.error_message == message
    assert s.state == "failed" and not s.authenticated and s.principal is None


# -- the state machine ---------------------------------------------------------------------------
@pytest.mark.parametrize("state, api_key, allowed, after", [
    ("handshake_or_versions", API_VERSIONS, True, "handshake"),
    ("handshake_or_versions", SASL_HANDSHAKE, True, "handshake_or_versions"),
    ("handshake_or_versions", SASL_AUTHENTICATE, False, "failed"),
    ("handshake_or_versions", PRODUCE, False, "failed"),
    ("handshake_or_versions", METADATA, False, "failed"),
    ("handshake", API_VERSIONS, False, "failed"),
    ("handshake", SASL_HANDSHAKE, True, "handshake"),
    ("handshake", SASL_AUTHENTICATE, False, "failed"),
    ("handshake", METADATA, False, "failed"),
    ("authenticate", SASL_AUTHENTICATE, True, "authenticate"),
    ("authenticate", SASL_HANDSHAKE, False, "failed"),
    ("authenticate", API_VERSIONS, False, "failed"),
    ("authenticate", PRODUCE, False, "failed"),
    ("complete", PRODUCE, True, "complete"),
    ("complete", METADATA, True, "complete"),
    ("complete", API_VERSIONS, True, "complete"),
    ("complete", SASL_HANDSHAKE, False, "failed"),
    ("complete", SASL_AUTHENTICATE, False, "failed"),
    ("failed", API_VERSIONS, False, "failed"),
    ("failed", SASL_HANDSHAKE, False, "failed"),
    ("failed", SASL_AUTHENTICATE, False, "failed"),
    ("failed", METADATA, False, "failed"),
])
def test_which_api_is_allowed_in_which_state(state, api_key, allowed, after):
    s = in_state(state)
    assert s.allows(api_key) is allowed
    assert s.state == after
    assert s.authenticated is (after == "complete")


@pytest.mark.parametrize("enabled, state, mechanism, code, after", [
    (ALL, "handshake_or_versions", "SCRAM-SHA-256", 0, "authenticate"),
    (ALL, "handshake", "SCRAM-SHA-512", 0, "authenticate"),
    (ALL, "handshake", "PLAIN", 0, "authenticate"),
    (ALL, "handshake_or_versions", "GSSAPI", 33, "failed"),
    (ALL, "handshake_or_versions", "scram-sha-256", 33, "failed"),
    (ALL, "handshake_or_versions", "", 33, "failed"),
    (("SCRAM-SHA-256",), "handshake_or_versions", "PLAIN", 33, "failed"),
    (ALL, "authenticate", "PLAIN", 34, "failed"),
    (ALL, "complete", "PLAIN", 34, "failed"),
    (ALL, "failed", "PLAIN", 34, "failed"),
])
def test_handshake_outcomes(enabled, state, mechanism, code, after):
    s = in_state(state) if enabled == ALL else server(enabled)
    r = s.process_handshake(mechanism)
    assert r == HandshakeResult(code, tuple(enabled), close=code != 0)
    assert s.state == after
    if code == 0:
        assert s.mechanism == mechanism


def test_a_rejected_api_versions_may_be_retried_with_an_older_version():
    s = server()
    assert s.allows(API_VERSIONS) and s.state == "handshake"
    s.process_api_versions_rejected()
    assert s.state == "handshake_or_versions"
    assert s.allows(API_VERSIONS) and not s.allows(API_VERSIONS)


@pytest.mark.parametrize("enabled", [(), ("GSSAPI",), ("OAUTHBEARER", "PLAIN")])
def test_only_plain_and_scram_can_be_enabled(enabled):
    with pytest.raises(ValueError):
        SaslServer(enabled, lookup)


@pytest.mark.parametrize("state", ["handshake_or_versions", "handshake", "complete", "failed"])
def test_authenticate_outside_its_state_is_illegal(state):
    s = in_state(state)
    r = s.process_authenticate(plain("", "alice", "alice-secret"))
    assert_failed(r, s, code=34)
    assert r.error_message


# -- SCRAM -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("user", ["alice", "al,i=ce"])
def test_a_full_scram_exchange_with_scramps_client(mechanism, user):
    s = server()
    first, final, client = scram_login(s, mechanism, user, PASSWORDS[user])
    assert (first.error_code, first.close, first.session_lifetime_ms) == (0, False, 0)
    assert first.auth_bytes.startswith(b"r=" + client.c_nonce.nonce.encode())
    assert (final.error_code, final.error_message, final.close) == (0, None, False)
    client.set_server_final(final.auth_bytes.decode())   # raises unless the server signed right
    assert s.authenticated and s.state == "complete" and s.principal == f"User:{user}"
    assert s.allows(METADATA) and not s.allows(SASL_AUTHENTICATE)


def test_the_rfc_7677_vector():
    s = server(server_nonce=lambda: RFC_SERVER_NONCE)
    s.process_handshake("SCRAM-SHA-256")
    assert s.process_authenticate(RFC_CLIENT_FIRST).auth_bytes == RFC_SERVER_FIRST
    assert s.process_authenticate(RFC_CLIENT_FINAL) == AuthenticateResult(0, None, RFC_SERVER_FINAL)
    assert s.principal == "User:user"


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "alice-secret"),
                                            ("alice", "Alice-secret")])
def test_bad_logins_fail_alike(mechanism, user, password):
    s = server()
    first, final, _ = scram_login(s, mechanism, user, password)
    assert_failed(final or first, s, message=GENERIC.format(mechanism))


def test_the_second_mechanism_has_its_own_credential():
    only_256 = {k: v for k, v in USERS.items() if k[0] == "SCRAM-SHA-256"}
    s = server(lookup=lambda m, u: only_256.get((m, u)))
    first, _, _ = scram_login(s, "SCRAM-SHA-512", "alice", "alice-secret")
    assert_failed(first, s, message=GENERIC.format("SCRAM-SHA-512"))


def _first_then(final: bytes, mechanism="SCRAM-SHA-256"):
    s = server(server_nonce=lambda: RFC_SERVER_NONCE)
    s.process_handshake(mechanism)
    assert s.process_authenticate(RFC_CLIENT_FIRST).error_code == 0
    return s, s.process_authenticate(final)


@pytest.mark.parametrize("final", [
    RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"),                 # tampered proof
    RFC_CLIENT_FINAL.replace(b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", b"p=AAAA"),
    RFC_CLIENT_FINAL.replace(b"$k0,", b"$k1,"),                     # server nonce changed
    RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),                 # "y,," channel binding
    RFC_CLIENT_FINAL[:-1],
    RFC_CLIENT_FIRST,
    b"", b"\xff\xfe", b"c=biws", b"garbage",
])
def test_a_bad_client_final_fails(final):
    s, r = _first_then(final)
    assert_failed(r, s, message=GENERIC.format("SCRAM-SHA-256"))


@pytest.mark.parametrize("first", [
    b"", b"\x00", b"\xff\xfe", b"n,,", b"n,,n=user", b"n,,r=abc,n=user",
    b"x,,n=user,r=abc", b"y,,n=user,r=abc", b"p=tls-unique,,n=user,r=abc",
    b"n,,n=us=er,r=abc",                      # "=" must be =2C or =3D
    b"n,,n=user,r=ab,c", b"n,,n=user,r=",
    b"n,,n=user,r=abc,tokenauth=true",        # delegation tokens: none kept here
    b"n,,n=user,r=abc,tokenauth=TRUE",
    "n,,n=usér,r=abc".encode(),               # Kafka's saslname is ASCII
    b"n,,n=nobody,r=abc",
])
def test_a_bad_client_first_fails_without_a_hint(first):
    s = server()
    s.process_handshake("SCRAM-SHA-512")
    assert_failed(s.process_authenticate(first), s, message=GENERIC.format("SCRAM-SHA-512"))


def test_a_different_authzid_gets_kafkas_message_for_a_known_user_only():
    s = server()
    s.process_handshake("SCRAM-SHA-256")
    assert_failed(s.process_authenticate(b"n,a=admin,n=user,r=abc"), s, message=AUTHZID)
    s = server()
    s.process_handshake("SCRAM-SHA-256")
    assert_failed(s.process_authenticate(b"n,a=admin,n=nobody,r=abc"), s,
                  message=GENERIC.format("SCRAM-SHA-256"))


def old_librdkafka_final() -> bytes:
    """librdkafka < 2.11 (kcat's 2.0.2) repeats its own nonce in front of the server-first
    nonce; its proof covers that message, so the exchange is the RFC's with a longer r."""
    cnonce = RFC_CLIENT_FIRST.split(b"r=")[1]
    nonce = cnonce + RFC_SERVER_FIRST.split(b",")[0][2:]
    without_proof = b"c=biws,r=" + nonce
    cred = decode_credential(RFC_CREDENTIAL_TEXT)
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", cred.salt, cred.iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    auth = RFC_CLIENT_FIRST[3:] + b"," + RFC_SERVER_FIRST + b"," + without_proof
    sig = hmac.new(cred.stored_key, auth, "sha256").digest()
    return without_proof + b",p=" + base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig)))


def test_old_librdkafkas_repeated_nonce_is_accepted_as_kafka_accepts_it():
    s, r = _first_then(old_librdkafka_final())
    assert (r.error_code, s.principal) == (0, "User:user")
    assert r.auth_bytes.startswith(b"v=")


@pytest.mark.parametrize("first", [b"n,a=user,n=user,r=abc", b"n,,m=ext,n=user,r=abc"])
def test_kafkas_grammar_takes_an_equal_authzid_and_a_reserved_extension(first):
    s = server(server_nonce=lambda: "srv")
    s.process_handshake("SCRAM-SHA-256")
    r = s.process_authenticate(first)
    assert r.error_code == 0 and r.auth_bytes.startswith(b"r=abcsrv,s=")


@pytest.mark.parametrize("cred", [
    ScramCredential(SALT, b"k", b"k", MIN_ITERATIONS - 1),
    "not a credential",
])
def test_a_weak_or_broken_stored_credential_fails(cred):
    s = server(lookup=lambda m, u: cred)
    s.process_handshake("SCRAM-SHA-256")
    assert_failed(s.process_authenticate(RFC_CLIENT_FIRST), s,
                  message=GENERIC.format("SCRAM-SHA-256"))


@pytest.mark.parametrize("mechanism", ALL)
def test_a_raising_lookup_is_a_failed_login_not_an_exception(mechanism):
    def broken(m, u):
        raise RuntimeError("zookeeper is down")
    s = server(lookup=broken)
    s.process_handshake(mechanism)
    data = plain("", "alice", "alice-secret") if mechanism == "PLAIN" else RFC_CLIENT_FIRST
    r = s.process_authenticate(data)
    assert_failed(r, s)
    assert "zookeeper" not in r.error_message


def test_a_third_scram_message_is_illegal():
    s = server(server_nonce=lambda: RFC_SERVER_NONCE)
    s.process_handshake("SCRAM-SHA-256")
    s.process_authenticate(RFC_CLIENT_FIRST)
    assert s.process_authenticate(RFC_CLIENT_FINAL).error_code == 0
    r = s.process_authenticate(RFC_CLIENT_FINAL)
    assert_failed(r, s, code=34,
                  message="SaslAuthenticate request received after successful authentication")


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                 st.from_regex(rb"\An,(a=[a-z]{1,4})?,n=[a-z=,]{1,6},r=[!-~]{0,8}\Z")),
       st.sampled_from(MECHANISMS))
def test_random_client_firsts_never_raise_nor_authenticate(data, mechanism):
    s = server()
    s.process_handshake(mechanism)
    r = s.process_authenticate(data)
    assert r.error_code in (0, 58) and not s.authenticated
    if r.error_code == 0:         # a well-formed first message from a known user
        assert s.state == "authenticate" and r.auth_bytes.startswith(b"r=")
        assert s.process_authenticate(data).error_code == 58 and s.state == "failed"


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                 st.builds(lambda p: RFC_CLIENT_FINAL[:-45] + b"p=" + base64.b64encode(p),
                           st.binary(min_size=32, max_size=32))))
def test_random_client_finals_never_raise_nor_authenticate(data):
    s, r = _first_then(data)
    assert_failed(r, s, message=GENERIC.format("SCRAM-SHA-256"))


# -- PLAIN -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("message, principal", [
    (plain("", "alice", "alice-secret"), "User:alice"),
    (plain("alice", "alice", "alice-secret"), "User:alice"),
    (plain("", "al,i=ce", "commas=equals"), "User:al,i=ce"),
])
def test_plain_good(message, principal):
    s = server()
    assert s.process_handshake("PLAIN").error_code == 0
    assert s.process_authenticate(message) == AuthenticateResult(0, None, b"", 0, False)
    assert s.authenticated and s.principal == principal
    assert s.allows(PRODUCE)


@pytest.mark.parametrize("message, error", [
    (plain("", "alice", "wrong"), PLAIN_INVALID),
    (plain("", "mallory", "alice-secret"), PLAIN_INVALID),
    (plain("admin", "alice", "alice-secret"), AUTHZID),
    (plain("admin", "alice", "wrong"), PLAIN_INVALID),         # the password is checked first
    (plain("", "", "alice-secret"), "Authentication failed: username not specified"),
    (plain("", "alice", ""), "Authentication failed: password not specified"),
    (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0alice\0alice-secret\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\0\0\0\0\0\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\0alice\0alice-secre\xff", PLAIN_INVALID),
])
def test_plain_bad(message, error):
    s = server()
    s.process_handshake("PLAIN")
    assert_failed(s.process_authenticate(message), s, message=error)


def test_plain_prefers_the_sha512_credential():
    creds = {("SCRAM-SHA-512", "bob"): make_credential("SCRAM-SHA-512", "new", salt=SALT),
             ("SCRAM-SHA-256", "bob"): make_credential("SCRAM-SHA-256", "old", salt=SALT),
             ("SCRAM-SHA-256", "carol"): make_credential("SCRAM-SHA-256", "c", salt=SALT)}
    results = {}
    for user, password in [("bob", "new"), ("bob", "old"), ("carol", "c")]:
        s = server(lookup=lambda m, u: creds.get((m, u)))
        s.process_handshake("PLAIN")
        results[user, password] = s.process_authenticate(plain("", user, password)).error_code
    assert results == {("bob", "new"): 0, ("bob", "old"): 58, ("carol", "c"): 0}


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=100))
def test_random_plain_messages_never_raise_nor_authenticate(data):
    s = server()
    s.process_handshake("PLAIN")
    r = s.process_authenticate(data)
    assert r.error_code == 58 and r.close and not s.authenticated


def test_non_bytes_auth_bytes_is_a_failure_not_an_exception():
    s = server()
    s.process_handshake("PLAIN")
    assert_failed(s.process_authenticate(None), s)


# -- credentials -----------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("iterations", [MIN_ITERATIONS, 8192, MAX_ITERATIONS])
def test_make_credential_matches_scramp_for_ascii_passwords(mechanism, iterations):
    c = make_credential(mechanism, "pencil", iterations, salt=SALT)
    expected = scramp.ScramMechanism(mechanism).make_auth_info("pencil", iterations, SALT)
    assert (c.salt, c.stored_key, c.server_key, c.iterations) == expected


def test_the_kafka_text_form_of_a_known_credential():
    c = make_credential("SCRAM-SHA-256", "pencil", salt=RFC_SALT)
    assert encode_credential(c) == RFC_CREDENTIAL_TEXT
    assert decode_credential(RFC_CREDENTIAL_TEXT) == c


def test_keys_are_over_plain_utf8_without_saslprep():
    # Kafka's ScramFormatter.normalize is just UTF-8; SASLprep would map NBSP to a space.
    password = "pass\u00a0word"
    c = make_credential("SCRAM-SHA-256", password, salt=SALT)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), SALT, 4096)
    assert c.server_key == hmac.new(salted, b"Server Key", "sha256").digest()
    assert verify_password(c, "SCRAM-SHA-256", password)
    assert not verify_password(c, "SCRAM-SHA-256", "pass word")


def test_the_default_salt_is_random_and_long_enough():
    a, b = (make_credential("SCRAM-SHA-512", "x") for _ in range(2))
    assert a.salt != b.salt and len(a.salt) >= 12 and a.stored_key != b.stored_key


@pytest.mark.parametrize("mechanism, iterations, salt", [
    ("SCRAM-SHA-1", 4096, None), ("PLAIN", 4096, None), (None, 4096, None),
    ("SCRAM-SHA-256", MIN_ITERATIONS - 1, None), ("SCRAM-SHA-256", MAX_ITERATIONS + 1, None),
    ("SCRAM-SHA-256", 4096.0, None), ("SCRAM-SHA-256", 4096, b"short"),
])
def test_make_credential_refuses(mechanism, iterations, salt):
    with pytest.raises(ValueError):
        make_credential(mechanism, "pw", iterations, salt)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_verify_password(mechanism):
    c = make_credential(mechanism, "s3cret", salt=SALT)
    assert verify_password(c, mechanism, "s3cret") is True
    assert verify_password(c, mechanism, "s3cret ") is False
    other = "SCRAM-SHA-512" if mechanism == "SCRAM-SHA-256" else "SCRAM-SHA-256"
    assert verify_password(c, other, "s3cret") is False
    assert verify_password(ScramCredential(SALT, c.stored_key, c.server_key, 0), mechanism,
                           "s3cret") is False
    with pytest.raises(ValueError):
        verify_password(c, "PLAIN", "s3cret")


credentials = st.builds(ScramCredential, st.binary(max_size=64), st.binary(max_size=64),
                        st.binary(max_size=64), st.integers(1, 2**31 - 1))


@given(credentials)
def test_credential_text_round_trip(c):
    text = encode_credential(c)
    assert decode_credential(text) == c
    assert text.split(",")[0] == "salt=" + base64.b64encode(c.salt).decode()


@given(st.dictionaries(st.sampled_from(MECHANISMS), credentials),
       st.dictionaries(st.text(min_size=1, max_size=10).filter(lambda k: k not in MECHANISMS),
                       st.text(max_size=10), max_size=3))
def test_user_config_round_trip(creds, other):
    data = encode_user_config(creds, other)
    assert decode_user_config(data) == creds
    doc = json.loads(data)
    assert doc["version"] == 1 and {k: doc["config"][k] for k in other} == other


@pytest.mark.parametrize("text", [
    "", "salt=AA==", "salt=AA==,stored_key=AA==,server_key=AA==",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096,extra=1",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096,salt=AA==",
    "salt=A,stored_key=AA==,server_key=AA==,iterations=4096",
    "salt=AA==,stored_key=AA==,server_key=A?==,iterations=4096",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=x",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=-1",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=0",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=+4096",
    "salt=AA==,stored_key=AA==,server_key=AA==,iterations=99999999999",
    "salt,stored_key=AA==,server_key=AA==,iterations=4096",
    "=AA==,stored_key=AA==,server_key=AA==,iterations=4096",
    None,
])
def test_decode_credential_refuses_malformed_text(text):
    with pytest.raises(ValueError):
        decode_credential(text)


def test_decode_the_znode_kafka_writes():
    creds = decode_user_config(ALICE_ZNODE)
    assert set(creds) == set(MECHANISMS)
    assert creds["SCRAM-SHA-256"].salt == SALT and creds["SCRAM-SHA-256"].iterations == 4096
    for m, c in creds.items():
        assert verify_password(c, m, "alice-secret") and not verify_password(c, m, "alice")
    # and a SCRAM client logs in against exactly what the znode holds
    s = server(lookup=lambda m, u: creds.get(m) if u == "alice" else None)
    _, final, _ = scram_login(s, "SCRAM-SHA-512", "alice", "alice-secret")
    assert final.error_code == 0 and s.principal == "User:alice"


def test_encode_user_config_writes_kafkas_compact_json():
    c = decode_credential(RFC_CREDENTIAL_TEXT)
    assert encode_user_config({"SCRAM-SHA-256": c}) == (
        b'{"version":1,"config":{"SCRAM-SHA-256":"' + RFC_CREDENTIAL_TEXT.encode() + b'"}}')
    with pytest.raises(ValueError):
        encode_user_config({"PLAIN": c})


@pytest.mark.parametrize("data, expected", [
    (b'{"version":1,"config":{}}', {}),
    (b'{"version":1}', {}),
    (b'{"version":1,"config":{"consumer_byte_rate":"10"}}', {}),
])
def test_decode_user_config_without_credentials(data, expected):
    assert decode_user_config(data) == expected


@pytest.mark.parametrize("data", [
    b"", b"not json", b"\xff", b"[1,2]", b'{"version":1,"config":[]}',
    b'{"version":1,"config":{"SCRAM-SHA-256":"salt=AA=="}}',
    b'{"version":1,"config":{"SCRAM-SHA-256":42}}',
])
def test_decode_user_config_refuses_malformed_data(data):
    with pytest.raises(ValueError):
        decode_user_config(data)


# -- re-authentication (KIP-368) -------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.ms = 1_000

    def __call__(self) -> int:
        return self.ms


def reauth_server(lifetime_ms: int = 10_000, clock: Clock | None = None) -> SaslServer:
    return server(reauth_ms=lambda mechanism: lifetime_ms if mechanism != "PLAIN" else 0,
                  clock_ms=clock or Clock())


def scram_again(s: SaslServer, mechanism: str, user: str, password: str, version: int = 2):
    """A re-authentication on an authenticated connection: SaslHandshake, then SCRAM."""
    client = scramp.ScramClient([mechanism], user, password)
    assert s.allows(SASL_HANDSHAKE) and s.reauthenticating and s.authenticated
    shake = s.process_handshake(mechanism)
    if shake.error_code:
        return shake
    assert s.allows(SASL_AUTHENTICATE)
    first = s.process_authenticate(client.get_client_first().encode(), version)
    if first.error_code:
        return first
    client.set_server_first(first.auth_bytes.decode())
    assert s.allows(SASL_AUTHENTICATE)
    return s.process_authenticate(client.get_client_final().encode(), version)


def test_a_session_has_the_configured_lifetime_and_then_expires():
    clock = Clock()
    s = reauth_server(10_000, clock)
    _first, final, _client = scram_login(s, "SCRAM-SHA-512", "alice", "alice-secret")
    assert final.error_code == 0 and final.session_lifetime_ms == 10_000
    assert s.expires_ms == 11_000 and s.allows(METADATA)
    clock.ms = 11_001
    assert not s.allows(METADATA) and s.state == "failed" and s.principal is None


def test_without_a_lifetime_a_second_handshake_is_illegal_as_before():
    s = server()
    _first, final, _client = scram_login(s, "SCRAM-SHA-256", "alice", "alice-secret")
    assert final.session_lifetime_ms == 0 and s.expires_ms is None
    assert not s.allows(SASL_HANDSHAKE) and s.state == "failed"
    plain_only = reauth_server()
    assert plain_only.process_handshake("PLAIN").error_code == 0
    ok = plain_only.process_authenticate(plain("", "alice", "alice-secret"))
    assert (ok.error_code, ok.session_lifetime_ms, plain_only.expires_ms) == (0, 0, None)


def test_a_reauthentication_keeps_the_principal_meanwhile_and_starts_a_new_session():
    clock = Clock()
    s = reauth_server(10_000, clock)
    scram_login(s, "SCRAM-SHA-512", "alice", "alice-secret")
    clock.ms = 9_000
    assert s.allows(SASL_HANDSHAKE) and s.principal == "User:alice"
    assert s.process_handshake("SCRAM-SHA-512").error_code == 0
    assert not s.allows(METADATA) and s.state == "failed"        # only SASL until it is done
    s = reauth_server(10_000, clock)
    scram_login(s, "SCRAM-SHA-512", "alice", "alice-secret")
    done = scram_again(s, "SCRAM-SHA-512", "alice", "alice-secret")
    assert (done.error_code, done.session_lifetime_ms) == (0, 10_000)
    assert s.state == "complete" and not s.reauthenticating and s.expires_ms == 19_000
    assert s.allows(PRODUCE) and s.principal == "User:alice"


@pytest.mark.parametrize("mechanism, user, password, code", [
    ("SCRAM-SHA-512", "user", "pencil", 58),              # another principal
    ("SCRAM-SHA-512", "alice", "wrong", 58),              # a bad password
    ("SCRAM-SHA-256", "alice", "alice-secret", 33),       # another mechanism
])
def test_a_failed_reauthentication_closes(mechanism, user, password, code):
    s = reauth_server()
    scram_login(s, "SCRAM-SHA-512", "alice", "alice-secret")
    r = scram_again(s, mechanism, user, password)
    assert r.error_code == code and r.close and s.state == "failed" and s.principal is None
    if user == "user":
        assert r.error_message == ("Cannot change principals during re-authentication from "
                                   "User:alice: User:user")


def test_a_client_that_used_v0_cannot_reauthenticate_but_still_expires():
    clock = Clock()
    s = reauth_server(10_000, clock)
    assert s.allows(API_VERSIONS) and s.allows(SASL_HANDSHAKE)
    assert s.process_handshake("SCRAM-SHA-256").error_code == 0
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "alice-secret")
    first = s.process_authenticate(client.get_client_first().encode(), 0)
    client.set_server_first(first.auth_bytes.decode())
    final = s.process_authenticate(client.get_client_final().encode(), 0)
    assert (final.error_code, final.session_lifetime_ms, s.expires_ms) == (0, 0, 11_000)
    assert not s.allows(SASL_HANDSHAKE) and s.state == "failed"


def test_reauthentication_needs_a_clock():
    with pytest.raises(ValueError, match="clock"):
        server(reauth_ms=lambda m: 1000)
