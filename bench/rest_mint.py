"""The minting function's own cost, warm: its handler with the key in memory, and with the key read from Secrets
Manager (moto's, over HTTP on 127.0.0.1, so the figure is the handler's round trip plus moto's, not AWS's), next to
the bare HS256 signature in the same run. p50 and p95 of ``--calls`` calls after ``--warm`` unmeasured ones.

Run in the repo root: ``.venv/bin/python bench/rest_mint.py``. A real function's latency adds the Function URL's
SigV4 check and Secrets Manager's own answer (tens of milliseconds in-Region); measure it on a deployed stack with
``hyperpod_cdk.rest.client.TokenMinter.mint`` in a loop.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hyperpod_cdk.rest.minter import handler as minter  # noqa: E402
from hyperpod_cdk.rest.minter.token import mint  # noqa: E402

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/pipeline"
EVENT = {
    "requestContext": {
        "http": {"method": "POST"},
        "authorizer": {"iam": {"userArn": f"arn:aws:sts::{ACCOUNT}:assumed-role/pipeline/run"}},
    }
}


def timed(call: Callable[[], object], calls: int, warm: int) -> tuple[float, float]:
    for _ in range(warm):
        call()
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    quantiles = statistics.quantiles(seconds, n=20)
    return statistics.median(seconds), quantiles[18]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warm", type=int, default=20)
    args = parser.parse_args()
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-west-2",
        AWS_ENDPOINT_URL=f"http://{host}:{port}",
    )
    try:
        import boto3

        arn = boto3.client("secretsmanager").create_secret(Name="key", SecretString="k" * 64)["ARN"]
        os.environ.update(
            {
                minter.SECRET_ENV: arn,
                minter.LIFETIME_ENV: "900",
                minter.IDENTITIES_ENV: json.dumps({ROLE: "pipeline"}),
            }
        )
        settings = minter.Settings.from_env(os.environ)
        context = SimpleNamespace(invoked_function_arn=f"arn:aws:lambda:us-west-2:{ACCOUNT}:function:m")
        quiet = {"log": lambda _: None}
        rows = {
            # `now` is injected: the benchmark times minting only
            "HS256 token alone (token.mint)": lambda: mint(b"k" * 64, "pipeline", 900, 1_800_000_000),
            "handler, key in memory": lambda: minter.respond(
                EVENT, settings, key=lambda: b"k" * 64, tags_of=lambda *_: None, own_account=ACCOUNT, now=1, **quiet
            ),
            "handler, key from moto's Secrets Manager": lambda: minter.handler(EVENT, context),
        }
        sys.stdout = open(os.devnull, "w")  # the handler's audit line  # noqa: SIM115
        results = {name: timed(call, args.calls, args.warm) for name, call in rows.items()}
        sys.stdout = sys.__stdout__
    finally:
        server.stop()
    base = results["HS256 token alone (token.mint)"][0]
    print(f"`.venv/bin/python bench/rest_mint.py --calls {args.calls} --warm {args.warm}`\n")
    print("| call | p50 | p95 | p50 / token alone |\n|---|---|---|---|")
    for name, (p50, p95) in results.items():
        print(f"| {name} | {p50 * 1e3:.3f} ms | {p95 * 1e3:.3f} ms | {p50 / base:.1f}x |")


if __name__ == "__main__":
    main()
