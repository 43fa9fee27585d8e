"""``saintpipe certs …``: TLS material for the feature shards (a private CA, server and client certificates, a token).

Handlers only parse flags and call :mod:`saintpipe.core.certificates`, imported when they run.
They print file paths, never a key's or the token's contents. See docs/how-to/tls.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from saintpipe.core.argtypes import integer

DEFAULT_DAYS = 365
MAX_DAYS = 3650  # the same bound as saintpipe.core.certificates.MAX_DAYS, not imported to keep --help light


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser("certs", help="generate and inspect TLS certificates for the feature shards",
                               description="TLS material for the feature shards' --tls-cert, --tls-key, "
                               "--tls-client-ca and --token-file; see docs/how-to/tls.md.")
    sub = parser.add_subparsers(dest="certs_command", metavar="ACTION", required=True)

    gen = sub.add_parser(
        "generate", help="write a CA, a server certificate and optionally a client certificate and a token",
        description="Write ca.crt, server.crt, client.crt (0644) and ca.key, server.key, client.key, token (0600) "
        "into --out (created 0700). The server certificate covers every --host plus localhost and 127.0.0.1. "
        "Refuses a directory that already holds a bundle unless --keep-existing or --force, and never writes "
        "into a directory holding other files.")
    gen.add_argument("--out", type=Path, required=True, help="directory to write the bundle into")
    gen.add_argument("--host", action="append", default=[], metavar="NAME",
                     help="a host name or IP address clients dial the shards by (repeatable)")
    gen.add_argument("--days", type=integer(min=1, max=MAX_DAYS), default=DEFAULT_DAYS,
                     help=f"validity of the certificates in days, 1 to {MAX_DAYS} (default {DEFAULT_DAYS})")
    gen.add_argument("--client", action="store_true",
                     help="also write client.crt/client.key, for shards started with --tls-client-ca")
    gen.add_argument("--token", action="store_true", help="also write token (64 hex characters) for --token-file")
    gen.add_argument("--keep-existing", action="store_true",
                     help="keep a bundle already at --out if complete, covering every host and valid for over "
                     "30 more days (for a one-shot service run on every start)")
    gen.add_argument("--force", action="store_true",
                     help="replace a bundle already at --out (only a bundle: a directory with ca.crt)")
    gen.set_defaults(func=_generate)

    show = sub.add_parser("show", help="print each certificate's subject, SANs, issuer and expiry",
                          description="Print subject, subjectAltNames, issuer, purpose and validity of ca.crt, "
                          "server.crt and client.crt in DIR, and whether ca.crt signed the others.")
    show.add_argument("dir", type=Path)
    show.set_defaults(func=_show)


def _generate(args: argparse.Namespace) -> int:
    from saintpipe.core.certificates import write_bundle

    bundle = write_bundle(args.out, args.host, days=args.days, client=args.client, token=args.token,
                          keep_existing=args.keep_existing, force=args.force)
    if bundle.kept:
        print(f"kept {bundle.directory}: complete, covers every host, server.crt valid until "
              f"{bundle.expires:%Y-%m-%d %H:%M} UTC")
        return 0
    for path in bundle.written:
        print(f"wrote {path}")
    for path in bundle.removed:
        print(f"removed {path} (not part of the new bundle)")
    return 0


def _show(args: argparse.Namespace) -> int:
    import datetime as dt

    from saintpipe.core.certificates import describe_bundle
    from saintpipe.core.report import plural

    now = dt.datetime.now(dt.UTC)
    for info in describe_bundle(args.dir):
        left = info.not_after - now
        state = f"expires in {plural(left.days, 'day')}" if left.total_seconds() > 0 else "EXPIRED"
        if info.not_before > now:
            state = "NOT YET VALID"
        print(info.path)
        print(f"  subject:   {info.subject}")
        print(f"  issuer:    {info.issuer}")
        print(f"  SANs:      {', '.join(info.dns_names + info.ip_addresses) or '-'}")
        print(f"  purpose:   {info.purpose}")
        print(f"  valid:     {info.not_before:%Y-%m-%d %H:%M} to {info.not_after:%Y-%m-%d %H:%M} UTC ({state})")
        if info.signed_by_ca is not None:
            print(f"  signed by ca.crt: {'yes' if info.signed_by_ca else 'NO'}")
    return 0
