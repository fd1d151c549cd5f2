"""actors/tls_context.py and actors/tls.py: Kafka's ssl.* configs to an SSLContext, the
sans-I/O TlsSession against a stdlib client SSLObject in memory (TLS 1.2 and 1.3, both directions, big writes, client
certificates, plaintext and random bytes refused), and the client context a broker uses to
reach another broker's TLS listener. The listener's own use of TlsSession over sockets is
tests/test_listener_security.py's. No Ray, no ZooKeeper; the certificates are trustme's
(tests/certs.py)."""

from __future__ import annotations

import random
import ssl

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from actors.tls import TlsError, TlsSession
from actors.tls_context import ssl_context_from_config
from replicas.errors import InvalidConfig
from tests.certs import CLIENT_NAME, make_certs
from tests.protocol_samples import sample_frame

pytestmark = pytest.mark.unit
MiB = 1 << 20
RECORD_MAX = 16384 + 256        # TLS plaintext limit plus the largest expansion


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def server_ctx(certs):
    return ssl_context_from_config(certs.broker_config())


# -- in memory: a stdlib client SSLObject against TlsSession --------------------------------------
class Client:
    """The client end in memory: a stdlib SSLObject over two MemoryBIOs."""

    def __init__(self, ctx: ssl.SSLContext, hostname: str = "localhost"):
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_side=False,
                                server_hostname=hostname)

    def handshake_step(self) -> bool:
        try:
            self.obj.do_handshake()
            return True
        except ssl.SSLWantReadError:
            return False

    def read_all(self) -> bytes:
        out = bytearray()
        while True:
            try:
                chunk = self.obj.read(MiB)
            except ssl.SSLWantReadError:
                return bytes(out)
            if not chunk:
                return bytes(out)
            out += chunk


def connect(client: Client, server: TlsSession, rounds: int = 10) -> None:
    """Shuttle bytes between the two until both say the handshake is done."""
    for _ in range(rounds):
        done = client.handshake_step()
        server.receive(client.outgoing.read())
        client.incoming.write(server.outgoing())
        if done and server.handshake_done:
            return
    raise AssertionError("handshake did not finish")


def client_ctx(certs, version: ssl.TLSVersion | None = None, client_cert: bool = False):
    ctx = certs.client_context(client_cert)
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


def records(ciphertext: bytes) -> list[tuple[int, int]]:
    """(content type, length) of each TLS record in `ciphertext`."""
    out, i = [], 0
    while i < len(ciphertext):
        kind, length = ciphertext[i], int.from_bytes(ciphertext[i + 3:i + 5], "big")
        out.append((kind, length))
        i += 5 + length
    assert i == len(ciphertext)
    return out


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3],
                         ids=["TLSv1.2", "TLSv1.3"])
def test_handshake_then_data_both_ways(certs, server_ctx, version):
    client, server = Client(client_ctx(certs, version)), TlsSession(server_ctx)
    assert not server.handshake_done and server.version is None
    connect(client, server)
    assert server.version == client.obj.version() == {
        ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
    assert server.peer_certificate is None           # ssl.client.auth=none asks for none
    client.obj.write(b"request")
    assert server.receive(client.outgoing.read()) == b"request"
    server.send(b"answer")
    client.incoming.write(server.outgoing())
    assert client.read_all() == b"answer"
    assert server.outgoing() == b"" and server.receive(b"") == b""


def test_a_mebibyte_is_cut_into_records_and_reassembled_from_any_chunks(certs, server_ctx):
    client, server = Client(client_ctx(certs)), TlsSession(server_ctx)
    connect(client, server)
    client.read_all()                                 # TLS 1.3 session tickets
    data = random.Random(1).randbytes(MiB)
    server.send(data)
    wire = server.outgoing()
    kinds = records(wire)
    assert len(kinds) >= MiB // 16384 and all(k == 0x17 and n <= RECORD_MAX for k, n in kinds)
    client.incoming.write(wire)
    assert client.read_all() == data

    client.obj.write(data)
    wire, got = client.outgoing.read(), bytearray()
    for i in range(0, len(wire), 1000):               # records split across feeds
        got += server.receive(wire[i:i + 1000])
    assert bytes(got) == data


def test_plaintext_sent_before_the_handshake_waits_for_it(certs, server_ctx):
    client, server = Client(client_ctx(certs)), TlsSession(server_ctx)
    server.send(b"early")
    assert server.outgoing() == b""
    connect(client, server)
    assert client.read_all() == b"early"


def test_a_plaintext_kafka_request_is_refused(server_ctx):
    server = TlsSession(server_ctx)
    frame = sample_frame(18, 3)                       # ApiVersions v3, as a plaintext client sends
    assert frame[:4] == len(frame[4:]).to_bytes(4, "big") and frame[4:6] == b"\x00\x12"
    with pytest.raises(TlsError, match=r"not TLS \(first byte 0x00.*plaintext client"):
        server.receive(frame)
    with pytest.raises(TlsError, match="not TLS"):    # and it stays refused
        server.receive(b"")
    assert not server.handshake_done


GARBAGE = st.one_of(
    st.binary(min_size=1, max_size=3000),
    # looks like a handshake record at first: OpenSSL must parse into it
    st.builds(lambda body, v: b"\x16\x03" + bytes([v]) + len(body).to_bytes(2, "big") + body,
              st.binary(max_size=3000), st.integers(0, 4)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(garbage=GARBAGE, cuts=st.lists(st.integers(1, 200), max_size=8))
def test_random_bytes_fail_or_wait_and_never_give_plaintext(server_ctx, garbage, cuts):
    server = TlsSession(server_ctx)
    pieces, i = [], 0
    for n in cuts:
        pieces.append(garbage[i:i + n])
        i += n
    pieces.append(garbage[i:])
    try:
        for piece in pieces:
            assert server.receive(piece) == b""
    except TlsError as exc:
        assert str(exc)
    assert not server.handshake_done


def test_a_truncated_client_hello_waits_for_the_rest(certs, server_ctx):
    client, server = Client(client_ctx(certs)), TlsSession(server_ctx)
    client.handshake_step()
    hello = client.outgoing.read()
    assert hello[0] == 0x16
    assert server.receive(hello[:-1]) == b""
    assert server.outgoing() == b"" and not server.handshake_done
    server.receive(hello[-1:])
    assert server.outgoing()[0] == 0x16               # ServerHello, once it is all there


def test_a_corrupted_record_after_the_handshake_is_an_error(certs, server_ctx):
    client, server = Client(client_ctx(certs)), TlsSession(server_ctx)
    connect(client, server)
    client.obj.write(b"x" * 100)
    wire = bytearray(client.outgoing.read())
    wire[-3] ^= 0xFF
    with pytest.raises(TlsError, match="bad TLS data"):
        server.receive(bytes(wire))


def test_close_notify_both_ways(certs, server_ctx):
    client, server = Client(client_ctx(certs)), TlsSession(server_ctx)
    connect(client, server)
    server.close()
    client.incoming.write(server.outgoing())
    assert client.obj.read(10) == b""                 # EOF (no data raises SSLWantReadError)
    with pytest.raises(TlsError, match="after close"):
        server.send(b"late")
    client2, server2 = Client(client_ctx(certs)), TlsSession(server_ctx)
    connect(client2, server2)
    client2.obj.write(b"last")
    with pytest.raises(ssl.SSLWantReadError):
        client2.obj.unwrap()
    assert server2.receive(client2.outgoing.read()) == b"last"
    assert server2.peer_closed


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3],
                         ids=["TLSv1.2", "TLSv1.3"])
def test_client_auth_required(certs, version):
    ctx = ssl_context_from_config(certs.broker_config(client_auth="required"))
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    client, server = Client(client_ctx(certs, version)), TlsSession(ctx)
    with pytest.raises(TlsError, match="certificate"):
        connect(client, server)
    client, server = Client(client_ctx(certs, version, client_cert=True)), TlsSession(ctx)
    connect(client, server)
    subject = dict(x[0] for x in server.peer_certificate["subject"])
    assert subject["commonName"] == CLIENT_NAME


def test_client_auth_requested_lets_a_client_without_a_certificate_in(certs):
    ctx = ssl_context_from_config(certs.broker_config(client_auth="requested"))
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    client, server = Client(client_ctx(certs)), TlsSession(ctx)
    connect(client, server)
    assert server.handshake_done and server.peer_certificate is None


# -- ssl_context_from_config ----------------------------------------------------------------------
def handshakes(certs, ctx: ssl.SSLContext, version=None) -> bool:
    try:
        connect(Client(client_ctx(certs, version)), TlsSession(ctx))
        return True
    except TlsError:
        return False


def config_error(config, listener=None) -> str:
    with pytest.raises(InvalidConfig) as info:
        ssl_context_from_config(config, listener)
    assert "\n" not in info.value.message
    return info.value.message


def test_a_pem_keystore_file(certs):
    ctx = ssl_context_from_config(certs.broker_config())
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_3
    assert ctx.verify_mode == ssl.CERT_NONE
    assert handshakes(certs, ctx)


def test_inline_pem_also_with_newlines_lost_to_line_continuations(certs, tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    config = certs.broker_config(inline=True)
    assert "ssl.keystore.location" not in config
    assert handshakes(certs, ssl_context_from_config(config))
    flat = {k: v.replace("\n", " ") for k, v in config.items()}
    flat["ssl.truststore.certificates"] = certs.ca.read_text().replace("\n", " ")
    flat["ssl.client.auth"] = "requested"
    assert handshakes(certs, ssl_context_from_config(flat))
    assert list(tmp_path.iterdir()) == []             # the key's temp file is gone


@pytest.mark.parametrize("config, words", [
    ({}, "ssl.keystore.location is not set: a TLS listener needs a PEM keystore"),
    ({"ssl.keystore.type": "PEM"}, "ssl.keystore.location is not set"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x.jks"},
     "ssl.keystore.type=JKS is not supported: rayka reads PEM only; set ssl.keystore.type=PEM"),
    ({"ssl_keystore_type": "pkcs12", "ssl.keystore.location": "/x.p12"},
     "ssl_keystore_type=PKCS12 is not supported"),
    ({"ssl.keystore.key": "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----"},
     "ssl.keystore.key is set but ssl.keystore.certificate.chain is not"),
    ({"ssl.keystore.location": "/nonexistent/server.pem"},
     "ssl.keystore.location=/nonexistent/server.pem: cannot read it (No such file"),
    ({"ssl.keystore.password": "x", "ssl.keystore.location": "/x.pem"},
     "ssl.keystore.password cannot be set with a PEM keystore"),
    ({"ssl.enabled.protocols": "SSLv3,TLSv1.2", "ssl.keystore.location": "/x.pem"},
     "ssl.enabled.protocols: unknown protocol(s) ['SSLv3']"),
    ({"ssl.client.auth": "always", "ssl.keystore.location": "SERVER"},
     "ssl.client.auth='always': expected one of none, requested, required"),
    ({"ssl.client.auth": "required", "ssl.keystore.location": "SERVER"},
     "ssl.client.auth=required needs ssl.truststore.location or ssl.truststore.certificates"),
    ({"ssl.truststore.type": "JKS", "ssl.keystore.location": "SERVER"},
     "ssl.truststore.type=JKS is not supported"),
    ({"ssl.truststore.location": "/nonexistent/ca.pem", "ssl.keystore.location": "SERVER"},
     "ssl.truststore.location=/nonexistent/ca.pem: no CA certificate could be read"),
    ({"ssl.cipher.suites": "TLS_NOT_A_CIPHER", "ssl.keystore.location": "SERVER"},
     "ssl.cipher.suites='TLS_NOT_A_CIPHER': no cipher OpenSSL knows (use OpenSSL names"),
])
def test_config_mistakes_name_the_key(certs, config, words):
    config = {k: str(certs.server) if v == "SERVER" else v for k, v in config.items()}
    assert words in config_error(config)


def test_an_encrypted_key_needs_the_right_ssl_key_password(certs):
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_encrypted)}
    message = config_error({**base, "ssl.key.password": "wrong"})
    assert message.startswith(f"ssl.keystore.location={certs.server_encrypted}: the private key "
                              f"does not decrypt: wrong ssl.key.password (")
    assert "PEM lib" in message                        # OpenSSL's own words
    assert "ssl.key.password is not set" in config_error(base)
    assert handshakes(certs, ssl_context_from_config({**base, "ssl.key.password":
                                                      certs.key_password}))


def test_a_keystore_without_a_key_or_certificate_says_so(certs, tmp_path):
    only_chain = certs.server_chain
    assert "no private key in it" in config_error({"ssl.keystore.location": str(only_chain)})
    inline = {"ssl.keystore.key": certs.server_key.read_text(),
              "ssl.keystore.certificate.chain": certs.client_chain.read_text()}
    assert "do not match" in config_error(inline)


def test_a_listener_override_wins_for_its_listener_only(certs):
    config = {"ssl.keystore.location": "/nonexistent/default.pem",
              "listener.name.ssl.ssl.keystore.location": str(certs.server),
              "listener.name.internal.ssl.keystore.location": str(certs.server),
              "listener.name.INTERNAL.ssl.client.auth": "required",
              "listener.name.internal.ssl.truststore.location": str(certs.ca)}
    assert handshakes(certs, ssl_context_from_config(config, "SSL"))
    assert ssl_context_from_config(config, "SSL").verify_mode == ssl.CERT_NONE
    assert ssl_context_from_config(config, "INTERNAL").verify_mode == ssl.CERT_REQUIRED
    assert "ssl.keystore.location=/nonexistent/default.pem" in config_error(config)
    assert "ssl.keystore.location=/nonexistent/default.pem" in config_error(config, "EXTERNAL")
    message = config_error({"ssl.client.auth": "required"}, "SASL_SSL")
    assert message.startswith("ssl.keystore.location is not set "
                              "(nor listener.name.sasl_ssl.ssl.keystore.location)")
    # underscored, "listener_name_sasl_ssl_..." has no one reading: refused, dotted named
    assert "give per-listener keys dotted" in config_error(
        {"listener_name_sasl_ssl_ssl_keystore_location": str(certs.server)}, "SASL_SSL")


def test_enabled_protocols_bound_the_versions(certs):
    only13 = ssl_context_from_config({**certs.broker_config(), "ssl.enabled.protocols": "TLSv1.3"})
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3
    assert not handshakes(certs, only13, ssl.TLSVersion.TLSv1_2)
    assert handshakes(certs, only13, ssl.TLSVersion.TLSv1_3)
    only12 = ssl_context_from_config({**certs.broker_config(),
                                      "ssl_enabled_protocols": " TLSv1.2 "})
    assert only12.maximum_version == ssl.TLSVersion.TLSv1_2
    assert not handshakes(certs, only12, ssl.TLSVersion.TLSv1_3)


def test_cipher_suites_restrict_tls12(certs):
    ctx = ssl_context_from_config({**certs.broker_config(), "ssl.enabled.protocols": "TLSv1.2",
                                   "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256"})
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == [
        "ECDHE-ECDSA-AES128-GCM-SHA256"]
    client = Client(client_ctx(certs, ssl.TLSVersion.TLSv1_2))
    server = TlsSession(ctx)
    connect(client, server)
    assert client.obj.cipher()[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"
