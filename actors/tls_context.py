"""Kafka's ssl.* broker configs → an ssl.SSLContext, for a TLS listener and for this broker
as a client of another broker's listener (replication).

Rules:
- `ssl_context_from_config` reads Kafka's broker names (dotted or underscored), and a
  `listener.name.<listener>.ssl.*` key wins over the plain `ssl.*` key for that listener,
  as in Kafka. Keystores and truststores are PEM only (a file, or Kafka 2.7+ inline PEM
  strings); JKS and PKCS12 are refused with what to set instead. Every config mistake is
  an InvalidConfig naming the key (and the file and OpenSSL's words when a file is bad);
  OpenSSL never prompts for a key password (an empty one is passed instead).
- `client_ssl_context` is the same keys seen from this broker as a client of another
  broker's listener: the truststore verifies the peer (none: the system's CAs), the
  keystore, when set, is this broker's certificate; ssl.endpoint.identification.algorithm
  "" turns the host-name check off (Kafka's default, "https", checks it).
- ssl.enabled.protocols is a range for OpenSSL, not a set (its lowest to its highest);
  client-initiated renegotiation is off on the server side.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping

from replicas.config_keys import dotted_key
from replicas.errors import InvalidConfig

__all__ = ["ssl_context_from_config", "client_ssl_context", "PROTOCOLS", "CLIENT_AUTH"]

PROTOCOLS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}


def ssl_context_from_config(config: Mapping[str, str], listener: str | None = None
                            ) -> ssl.SSLContext:
    """A server SSLContext from Kafka's ssl.* broker configs for `listener` (Kafka's
    listener name, e.g. "SSL"; its `listener.name.<name lowercased>.ssl.*` keys win)."""
    get = _Lookup(config, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.options |= ssl.OP_NO_RENEGOTIATION      # client-initiated renegotiation: a DoS lever
    _protocols(ctx, get)
    ciphers = get("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(_items(ciphers)))
        except ssl.SSLError as exc:
            raise InvalidConfig(f"{get.key('ssl.cipher.suites')}={ciphers!r}: no cipher OpenSSL "
                                f"knows (use OpenSSL names, e.g. ECDHE-RSA-AES256-GCM-SHA384): "
                                f"{_ssl_words(exc)}") from None
    _keystore(ctx, get)
    auth = (get("ssl.client.auth") or "none").strip().lower()
    if auth not in CLIENT_AUTH:
        raise InvalidConfig(f"{get.key('ssl.client.auth')}={auth!r}: expected one of "
                            f"{', '.join(CLIENT_AUTH)}")
    trusted = _truststore(ctx, get)
    if auth != "none" and not trusted:
        raise InvalidConfig(f"{get.key('ssl.client.auth')}={auth} needs "
                            f"ssl.truststore.location or ssl.truststore.certificates (the CAs "
                            f"that sign client certificates)")
    ctx.verify_mode = CLIENT_AUTH[auth]
    return ctx


def client_ssl_context(config: Mapping[str, str], listener: str | None = None
                       ) -> ssl.SSLContext:
    """A client SSLContext for this broker connecting to another broker's `listener`, from the
    same ssl.* configs: the truststore verifies the peer (none: the system's CAs), the
    keystore, when one is set, is this broker's certificate (for ssl.client.auth=required);
    ssl.endpoint.identification.algorithm "" turns the host-name check off (Kafka's
    default, "https", checks it)."""
    get = _Lookup(config, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, get)
    if not _truststore(ctx, get):
        ctx.load_default_certs()
    if get("ssl.keystore.location") or get("ssl.keystore.key"):
        _keystore(ctx, get)
    algorithm = get("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = (algorithm if algorithm is not None else "https").strip() != ""
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class _Lookup:
    """Config values by Kafka name: the listener's override first, dotted or underscored."""

    def __init__(self, config: Mapping[str, str], listener: str | None):
        # Kafka's listener prefix is the listener's name in lower case
        self.values = {dotted_key(str(k)).lower(): (k, v) for k, v in config.items()
                       if v is not None and (v != "" or dotted_key(str(k)).endswith(
                           "ssl.endpoint.identification.algorithm"))}
        self.prefix = f"listener.name.{listener.lower()}." if listener else ""

    def _find(self, name: str) -> tuple[str, str] | None:
        for key in ([self.prefix + name] if self.prefix else []) + [name]:
            if (hit := self.values.get(key.lower())) is not None:
                return hit
        return None

    def __call__(self, name: str) -> str | None:
        hit = self._find(name)
        return None if hit is None else hit[1]

    def key(self, name: str) -> str:
        """The key as the user spelled it (to name it in errors), else Kafka's name."""
        hit = self._find(name)
        return name if hit is None else str(hit[0])


def _items(value) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _protocols(ctx: ssl.SSLContext, get: _Lookup) -> None:
    names = _items(get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3")
    unknown = [n for n in names if n not in PROTOCOLS]
    if unknown or not names:
        raise InvalidConfig(f"{get.key('ssl.enabled.protocols')}: unknown protocol(s) "
                            f"{unknown or names}; expected some of {', '.join(PROTOCOLS)}")
    versions = sorted(PROTOCOLS[n] for n in names)
    # OpenSSL takes a range, not a set: "TLSv1.1,TLSv1.3" enables TLSv1.2 as well
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


def _check_pem_type(get: _Lookup, name: str) -> None:
    kind = (get(name) or "PEM").strip().upper()
    if kind != "PEM":
        store = "keystore" if "keystore" in name else "truststore"
        what = ("the private key and certificate chain" if store == "keystore"
                else "the CA certificates")
        raise InvalidConfig(f"{get.key(name)}={kind} is not supported: rayka reads PEM only; "
                            f"set {name}=PEM and ssl.{store}.location to a PEM file with {what} "
                            f"(e.g. openssl pkcs12 -in {store}.p12 -nodes -out {store}.pem)")


def _keystore(ctx: ssl.SSLContext, get: _Lookup) -> None:
    _check_pem_type(get, "ssl.keystore.type")
    if get("ssl.keystore.password"):
        raise InvalidConfig(f"{get.key('ssl.keystore.password')} cannot be set with a PEM "
                            f"keystore (as in Kafka): put the private key's password in "
                            f"ssl.key.password")
    password = get("ssl.key.password") or ""   # never None: OpenSSL would prompt on the tty
    location, key, chain = (get("ssl.keystore.location"), get("ssl.keystore.key"),
                            get("ssl.keystore.certificate.chain"))
    if location:
        _load_chain(ctx, location, password, get.key("ssl.keystore.location"))
        return
    if key and chain:
        _load_inline_chain(ctx, _pem(key), _pem(chain), password, get)
        return
    if key or chain:
        missing = "ssl.keystore.certificate.chain" if key else "ssl.keystore.key"
        raise InvalidConfig(f"{get.key('ssl.keystore.key' if key else missing)} is set but "
                            f"{missing} is not: inline PEM needs both")
    also = f" (nor {get.prefix}ssl.keystore.location)" if get.prefix else ""
    raise InvalidConfig(f"ssl.keystore.location is not set{also}: a TLS listener needs a PEM "
                        f"keystore (or inline ssl.keystore.key and ssl.keystore.certificate.chain)")


def _load_chain(ctx: ssl.SSLContext, path: str, password: str, key: str) -> None:
    try:
        ctx.load_cert_chain(path, password=password)
    except OSError as exc:
        text = _read_text(path)
        if isinstance(exc, ssl.SSLError) and text is not None:
            raise InvalidConfig(f"{key}={path}: {_pem_problem(text, password)} "
                                f"({_ssl_words(exc)})") from None
        raise InvalidConfig(f"{key}={path}: cannot read it ({_ssl_words(exc)})") from None


def _load_inline_chain(ctx: ssl.SSLContext, key_pem: str, chain_pem: str, password: str,
                       get: _Lookup) -> None:
    # load_cert_chain reads files only; mkstemp makes the file 0600, and it is gone at once
    fd, path = tempfile.mkstemp(prefix="rayka-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key_pem + "\n" + chain_pem + "\n")
        try:
            ctx.load_cert_chain(path, password=password)
        except ssl.SSLError as exc:
            raise InvalidConfig(f"{get.key('ssl.keystore.key')} / "
                                f"{get.key('ssl.keystore.certificate.chain')}: "
                                f"{_pem_problem(key_pem + chain_pem, password)} "
                                f"({_ssl_words(exc)})") from None
    finally:
        os.unlink(path)


def _truststore(ctx: ssl.SSLContext, get: _Lookup) -> bool:
    _check_pem_type(get, "ssl.truststore.type")
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        elif inline:
            ctx.load_verify_locations(cadata=_pem(inline))
        else:
            return False
    except (OSError, ValueError) as exc:
        name = "ssl.truststore.location" if location else "ssl.truststore.certificates"
        where = f"={location}" if location else ""
        raise InvalidConfig(f"{get.key(name)}{where}: no CA certificate could be read "
                            f"({_ssl_words(exc)})") from None
    return True


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def _pem(text: str) -> str:
    """Inline PEM as Kafka accepts it: a properties file's line continuations may have
    turned the newlines into spaces, so each block's base64 is re-wrapped."""
    def rewrap(m: re.Match) -> str:
        body = m.group(2)
        if ":" in body:                  # RFC 1421 headers (Proc-Type): leave the block alone
            return m.group(0)
        b64 = "".join(body.split())
        lines = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
        return f"-----BEGIN {m.group(1)}-----\n{lines}\n-----END {m.group(1)}-----"
    return "\n".join(rewrap(m) for m in _PEM_BLOCK.finditer(str(text))) or str(text)


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _pem_problem(text: str, password: str) -> str:
    """OpenSSL says only "PEM lib": say which part of the PEM is wrong."""
    if "PRIVATE KEY-----" not in text:
        return "no private key in it (a PEM keystore holds the key and the certificate chain)"
    if "CERTIFICATE-----" not in text:
        return "no certificate in it (a PEM keystore holds the key and the certificate chain)"
    if "ENCRYPTED PRIVATE KEY" in text or "Proc-Type: 4,ENCRYPTED" in text:
        return ("the private key does not decrypt: wrong ssl.key.password" if password
                else "the private key is encrypted and ssl.key.password is not set")
    return "the private key or certificate does not load (or they do not match)"


def _ssl_words(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    text = getattr(exc, "strerror", None) or str(exc)
    return f"{reason}: {text}" if reason and reason not in text else str(text)
