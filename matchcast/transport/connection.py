"""What a connection to a broker is, for both MQTT clients: the broker URL with its
credentials and TLS options, a list of brokers, the protocol, the last will.

:class:`BrokerURL` carries the credentials and the :class:`TLSOptions` of a connection,
:func:`broker_url_from` fills them in from the environment, and :meth:`TLSOptions.context` is
the one place an ``ssl.SSLContext`` is built. A password is never part of ``str()`` or
``repr()`` of either, so it stays out of logs and error messages. No MQTT library is imported
here: the fast client uses these without aiomqtt.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from events import BrokerError, topic_spec
from matchcast import redact

__all__ = [
    "ENV_BROKER",
    "ENV_CA_FILE",
    "ENV_CERT_FILE",
    "ENV_KEY_FILE",
    "ENV_KEY_PASSWORD",
    "ENV_PASSWORD",
    "ENV_USERNAME",
    "READER_QOS",
    "SUBSCRIBE_DROP_WINDOW_S",
    "BrokerURL",
    "Protocol",
    "TLSOptions",
    "WillSpec",
    "broker_url_from",
    "cannot_connect",
    "connect_hint",
    "describe",
    "parse_brokers",
]

#: Environment variable holding the broker URL when ``--broker`` is not given.
ENV_BROKER = "MATCHCAST_BROKER"
#: Credentials, so a password need not be on the command line (where ``ps`` shows it).
ENV_USERNAME = "MATCHCAST_USERNAME"
ENV_PASSWORD = "MATCHCAST_PASSWORD"  # noqa: S105 - the variable's name, not a password
#: TLS files for an ``mqtts://`` broker: the CA that signed it, and a client certificate.
ENV_CA_FILE = "MATCHCAST_CA_FILE"
ENV_CERT_FILE = "MATCHCAST_CERT_FILE"
ENV_KEY_FILE = "MATCHCAST_KEY_FILE"
#: Passphrase of an encrypted client key (without it, OpenSSL would prompt on the terminal).
ENV_KEY_PASSWORD = "MATCHCAST_KEY_PASSWORD"  # noqa: S105 - the variable's name
Protocol = Literal["auto", "5", "3.1.1"]
#: A connection the broker closes within this many seconds of a SUBSCRIBE still unanswered was
#: closed in answer to it (:class:`events.SubscribeDroppedError`; RabbitMQ 3.10 answers in
#: milliseconds), not lost to something else that happened to come then. Both clients.
SUBSCRIBE_DROP_WINDOW_S = 2.0
#: The QoS of a short-lived reader's subscriptions: ``control``'s search for replayers and its
#: reply, the replayer-status follower of ``watch`` and ``web``, ``clear``'s search. A reader
#: that keeps no session gains nothing from QoS 1 on one connection but an acknowledgement per
#: message; on NATS a QoS 1 subscription is a JetStream consumer, refused while JetStream is
#: unsettled after a node loss (5 ``control status`` of 10 failed so in a newcomer's run, for
#: minutes), where a QoS 0 one is served at once. Retained messages reach it all the same.
READER_QOS = 0


def describe(urls: Sequence[BrokerURL]) -> str:
    """A broker list as logs and errors show it: the URLs, comma-separated, passwords hidden."""
    return ",".join(str(u) for u in urls)


@dataclass(frozen=True, slots=True)
class TLSOptions:
    """How to check an ``mqtts://`` broker and prove who we are to it.

    Attributes:
        ca_file: PEM file of the CA(s) that signed the broker's certificate; the system's
            trust store when None.
        cert_file: PEM client certificate (with its key, unless ``key_file`` is given).
        key_file: PEM private key of the client certificate.
        key_password: passphrase of an encrypted ``key_file``; never shown.
        insecure: skip checking the broker's certificate and name. Anyone on the path can
            then read and change the stream: for a test broker only.
    """

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    insecure: bool = False

    @property
    def given(self) -> bool:
        """True when any option is set (so a broker URL without TLS is a mistake)."""
        return bool(self.ca_file or self.cert_file or self.key_file or self.insecure)

    def merged(self, other: TLSOptions) -> TLSOptions:
        """These options with whatever ``other`` sets on top."""
        return TLSOptions(
            ca_file=other.ca_file or self.ca_file,
            cert_file=other.cert_file or self.cert_file,
            key_file=other.key_file or self.key_file,
            key_password=other.key_password or self.key_password,
            insecure=other.insecure or self.insecure,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> TLSOptions:
        """The options ``$MATCHCAST_CA_FILE``, ``_CERT_FILE``, ``_KEY_FILE`` (and the key's
        ``$MATCHCAST_KEY_PASSWORD``) give."""

        def path(name: str) -> Path | None:
            value = environ.get(name)
            return Path(value) if value else None

        return cls(
            ca_file=path(ENV_CA_FILE),
            cert_file=path(ENV_CERT_FILE),
            key_file=path(ENV_KEY_FILE),
            key_password=environ.get(ENV_KEY_PASSWORD) or None,
        )

    def context(self) -> ssl.SSLContext:
        """A client ``SSLContext``: TLS 1.2 or later, the broker's certificate and host name
        checked against ``ca_file`` (or the system CAs) unless ``insecure``.

        Raises:
            ValueError: a file is missing or is not what it should be; the message names it.
        """
        if self.key_file and not self.cert_file:
            raise ValueError(f"key file {self.key_file} given without a certificate file")
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.ca_file is not None:
            try:
                ctx.load_verify_locations(cafile=self.ca_file)
            except (OSError, ssl.SSLError) as err:
                raise ValueError(
                    f"CA file {self.ca_file}: {_ssl_reason(err)} (expected PEM certificates)"
                ) from None
        if self.cert_file is not None:
            try:
                ctx.load_cert_chain(self.cert_file, self.key_file, password=self._key_password)
            except (OSError, ssl.SSLError) as err:
                key = f" / key file {self.key_file}" if self.key_file else ""
                raise ValueError(
                    f"certificate file {self.cert_file}{key}: {_ssl_reason(err)} (expected a "
                    f"PEM certificate and its key; an encrypted key needs ${ENV_KEY_PASSWORD})"
                ) from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def _key_password(self) -> str:
        # A callable, so OpenSSL never prompts on the terminal for an encrypted key.
        return self.key_password or ""


def connect_hint(err: Exception, *, tls: bool = False) -> str:
    """What to check after a failed connect, from its error (credentials, CA, TLS listener);
    empty when there is nothing to add."""
    text = str(err)
    if "authori" in text.lower() or "user name or password" in text.lower():
        return (
            f" (check the user name and password: in the URL, or ${ENV_USERNAME} and "
            f"${ENV_PASSWORD})"
        )
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            " (is the broker's certificate signed by the CA of --ca-file / "
            f"${ENV_CA_FILE}, and issued for this host name?)"
        )
    tls_mismatch = ("WRONG_VERSION_NUMBER", "record layer failure", "reset by peer", "EOF")
    if tls and any(s in text for s in tls_mismatch):
        return " (is this port TLS? mqtts:// needs a TLS listener, mqtt:// a plain one)"
    return ""


def cannot_connect(url: BrokerURL, why: BaseException | str, hint: str = "") -> BrokerError:
    """The error of a connect that got no MQTT session, worded alike by both clients and so by
    every command: ``broker URL: cannot connect: [Errno 111] Connection refused``.

    asyncio words a refused TCP connect "Connect call failed ('127.0.0.1', 1883)" where paho
    (and the system) say "Connection refused": an ``OSError`` is said in the system's words.
    """
    if isinstance(why, str):
        reason = why
    elif isinstance(why, OSError) and not isinstance(why, ssl.SSLError) and why.errno:
        reason = f"[Errno {why.errno}] {os.strerror(why.errno)}"
    else:
        reason = str(why) or "timed out"
    return BrokerError(str(url), f"cannot connect: {reason}{hint}")


def _ssl_reason(err: OSError | ssl.SSLError) -> str:
    if isinstance(err, ssl.SSLError):
        return err.reason or str(err)
    return err.strerror or str(err)


@dataclass(frozen=True, slots=True)
class BrokerURL:
    """A parsed ``mqtt://[user:pass@]host:port`` (or ``mqtts://`` for TLS).

    ``tls_options`` say how an ``mqtts://`` broker is checked; the password is in neither
    ``str()`` nor ``repr()``.
    """

    host: str
    port: int
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls_options: TLSOptions = TLSOptions()

    @classmethod
    def parse(cls, url: str) -> BrokerURL:
        """Parse a broker URL; a bare ``host[:port]`` means ``mqtt://``.

        Raises:
            ValueError: with what is wrong and what a good URL looks like.
        """
        raw = url if "://" in url else f"mqtt://{url}"
        parts = urlsplit(raw)
        if parts.scheme not in ("mqtt", "mqtts", "tcp", "ssl"):
            raise ValueError(
                f"broker URL {cls._redact(url)!r}: scheme must be mqtt:// or mqtts://, "
                f"e.g. mqtt://127.0.0.1:1883"
            )
        tls = parts.scheme in ("mqtts", "ssl")
        try:
            port = parts.port or (8883 if tls else 1883)
        except ValueError:
            raise ValueError(
                f"broker URL {cls._redact(url)!r}: the port must be a number 1-65535"
            ) from None
        if not parts.hostname:
            raise ValueError(
                f"broker URL {cls._redact(url)!r} has no host, e.g. mqtt://127.0.0.1:1883"
            )
        return cls(
            host=parts.hostname,
            port=port,
            tls=tls,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
        )

    @staticmethod
    def _redact(url: str) -> str:
        head, at, tail = url.rpartition("@")
        if not at:
            return url
        scheme, sep, creds = head.partition("://")
        user = creds.split(":", 1)[0]
        return f"{scheme}{sep}{user}:***@{tail}" if sep else f"{user}:***@{tail}"

    def __str__(self) -> str:
        """The URL with the password replaced by ``***``: safe to log."""
        user = (
            f"{self.username}:***@"
            if self.username and self.password
            else (f"{self.username}@" if self.username else "")
        )
        return f"{'mqtts' if self.tls else 'mqtt'}://{user}{self.host}:{self.port}"

    def with_credentials(self, username: str | None, password: str | None) -> BrokerURL:
        """This URL with the user name and password the URL itself leaves out filled in."""
        return replace(self, username=self.username or username, password=self.password or password)

    def with_tls(self, options: TLSOptions) -> BrokerURL:
        """This URL with ``options`` on top of its own TLS options.

        Raises:
            ValueError: TLS options for a plain ``mqtt://`` broker (a mistake that would
                otherwise send everything in clear).
        """
        if options.given and not self.tls:
            raise ValueError(
                f"TLS options were given but the broker {self} is not TLS: use mqtts://"
            )
        return replace(self, tls_options=self.tls_options.merged(options))

    def context(self) -> ssl.SSLContext | None:
        """The ``SSLContext`` for this broker, or None for plain ``mqtt://``.

        Raises:
            ValueError: a TLS file cannot be used.
        """
        return self.tls_options.context() if self.tls else None


@dataclass(frozen=True, slots=True)
class WillSpec:
    """A last will: published by the broker when the client vanishes.

    The defaults are the replayer status topic's (:data:`events.TOPIC_TREE`): the one will
    matchcast sets says a replayer went offline.
    """

    topic: str
    payload: bytes
    qos: int = topic_spec("status").qos
    retain: bool = topic_spec("status").retain
    #: MQTT 5 message expiry of the will, seconds (None: kept for ever); MQTT 3.1.1 has none.
    expiry: int | None = None


def parse_brokers(text: str) -> tuple[BrokerURL, ...]:
    """The brokers of a comma-separated list of URLs (a single URL is a list of one).

    Raises:
        ValueError: an empty list, an empty entry, a bad URL (naming it, password hidden), the
            same broker twice, or a list mixing ``mqtt://`` and ``mqtts://``.
    """
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise ValueError("no broker given: e.g. mqtt://127.0.0.1:1883")
    if not all(parts):
        raise ValueError(
            "an empty entry in the broker list: separate URLs with single commas, e.g. "
            "mqtt://10.0.0.1:1883,mqtt://10.0.0.2:1883"
        )
    urls = tuple(BrokerURL.parse(p) for p in parts)
    seen: set[tuple[str, int]] = set()
    for url in urls:
        key = (url.host, url.port)
        if key in seen:
            raise ValueError(f"broker {url} is listed twice")
        seen.add(key)
    if len({u.tls for u in urls}) > 1:
        raise ValueError("the broker list mixes mqtt:// and mqtts://: use one scheme for all nodes")
    return urls


def broker_url_from(
    option: str | None, environ: Mapping[str, str] | None = None
) -> tuple[BrokerURL, ...] | None:
    """The brokers from ``--broker``, else ``$MATCHCAST_BROKER``, else None (embedded).

    Either holds one URL or a comma-separated list of them, the nodes of one cluster
    (:func:`parse_brokers`). ``$MATCHCAST_USERNAME`` and
    ``$MATCHCAST_PASSWORD`` fill in what each URL leaves out, and ``$MATCHCAST_CA_FILE``,
    ``_CERT_FILE``, ``_KEY_FILE`` give the TLS files of ``mqtts://`` brokers.

    Raises:
        ValueError: a bad URL or list, a password without a user name, or TLS files for a
            broker that is not ``mqtts://``.
    """
    env = os.environ if environ is None else environ
    raw = option or env.get(ENV_BROKER)
    if not raw:
        return None
    # Masked in every log line, report and error message from now on.
    redact.remember(env.get(ENV_KEY_PASSWORD))
    from_env = TLSOptions.from_env(env)
    urls = []
    for parsed in parse_brokers(raw):
        url = parsed.with_credentials(env.get(ENV_USERNAME) or None, env.get(ENV_PASSWORD) or None)
        redact.remember(url.password)
        if url.password and not url.username:
            raise ValueError(
                f"a password is set but no user name: put it in the URL (mqtt://USER@host) "
                f"or in ${ENV_USERNAME}"
            )
        if from_env.given and not url.tls:
            raise ValueError(
                f"${ENV_CA_FILE}/${ENV_CERT_FILE}/${ENV_KEY_FILE} are set but the broker {url} "
                "is not TLS: use mqtts://"
            )
        urls.append(url.with_tls(from_env))
    return tuple(urls)
