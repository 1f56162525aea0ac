"""TLS on the wire: a server that takes nothing else, clients that trust only its CA, and
client certificates where the server asks for them."""

import asyncio
import json
import stat
from pathlib import Path

import pytest

from allot.bus import EmbeddedNats, EventLog
from allot.bus.identity import Keyring, load
from allot.bus.local_ca import issue, local_ca
from allot.bus.tls import CA_ENV, CERT_ENV, KEY_ENV, ServerTls, TlsError, client_context
from allot.client import AsyncClient
from allot.proto.events import JobSubmitted
from tests import builders as b


async def server_info(server: EmbeddedNats) -> dict[str, object]:
    """The INFO line the server sends a plain TCP connection before anything else."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        line = await asyncio.wait_for(reader.readline(), 5)
    finally:
        writer.close()
    verb, _, info = line.decode().partition(" ")
    assert verb == "INFO"
    return json.loads(info)  # type: ignore[no-any-return]


async def test_over_tls_a_client_that_trusts_the_ca_appends_and_reads(tmp_path: Path) -> None:
    tls = local_ca(tmp_path / "tls")
    async with EmbeddedNats(tmp_path / "nats", tls=tls) as server:
        assert (await server_info(server))["tls_required"] is True
        events = await EventLog.connect(server.url, tls=client_context(tls.ca))
        try:
            appended = await events.append(b.submitted("j1"))
            [record] = await events.read(appended.seq, appended.seq)
            assert isinstance(record.event, JobSubmitted)
            assert record.event.job_id == "j1"
        finally:
            await events.close()


async def test_a_client_that_does_not_trust_the_server_is_told_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CA_ENV, raising=False)
    elsewhere = local_ca(tmp_path / "another-ca")
    async with EmbeddedNats(tmp_path / "nats", tls=local_ca(tmp_path / "tls")) as server:
        for tls in (None, client_context(elsewhere.ca)):
            with pytest.raises(TlsError) as refused:
                await asyncio.wait_for(AsyncClient.connect(server.url, tls=tls), 10)
            assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
            assert CA_ENV in str(refused.value)


async def test_a_server_that_verifies_clients_admits_only_certificates_its_ca_signed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = local_ca(tmp_path / "tls")
    ca, ca_key = Path(made.ca), tmp_path / "tls" / "ca-key.pem"
    cert, key = issue(ca, ca_key, "alice", server=False)
    (tmp_path / "alice.pem").write_bytes(cert)
    (tmp_path / "alice-key.pem").write_bytes(key)
    # The server's own readiness probe presents the certificate ALLOT_TLS_* name.
    monkeypatch.setenv(CA_ENV, made.ca)
    monkeypatch.setenv(CERT_ENV, str(tmp_path / "alice.pem"))
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "alice-key.pem"))
    verifying = ServerTls(ca=made.ca, cert=made.cert, key=made.key, verify=True)
    async with EmbeddedNats(tmp_path / "nats", tls=verifying) as server:
        anonymous = client_context(made.ca)  # trusts the server, shows no certificate
        with pytest.raises(TlsError, match=f"CERTIFICATE_REQUIRED.*set {CERT_ENV} and {KEY_ENV}"):
            await asyncio.wait_for(AsyncClient.connect(server.url, tls=anonymous), 10)
        async with await AsyncClient.connect(server.url) as client:  # from ALLOT_TLS_*
            await client.events.ensure_stream()
            assert await client.events.last_seq() == 0


async def test_identities_still_decide_who_connects_over_tls(tmp_path: Path) -> None:
    keyring = Keyring(tmp_path / "identities")
    operator = load(keyring.ensure("admin", "operator"))
    tls = local_ca(tmp_path / "tls")
    async with EmbeddedNats(tmp_path / "nats", keyring=keyring, tls=tls) as server:
        async with await AsyncClient.connect(server.url, operator, client_context(tls.ca)) as c:
            assert c.operator
        with pytest.raises(Exception, match="does not admit a client without an identity"):
            await AsyncClient.connect(server.url, None, client_context(tls.ca))


def test_a_local_ca_keeps_its_keys_private_and_is_kept_across_restarts(tmp_path: Path) -> None:
    first = local_ca(tmp_path / "tls")
    ca_pem = Path(first.ca).read_bytes()
    second = local_ca(tmp_path / "tls")
    assert Path(second.ca).read_bytes() == ca_pem  # clients keep trusting the same CA
    for key in (Path(first.key), tmp_path / "tls" / "ca-key.pem"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "tls").stat().st_mode) == 0o700
