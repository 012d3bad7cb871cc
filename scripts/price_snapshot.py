"""Rewrite src/hyperpod_cdk/data/prices_snapshot.json from the AWS Price List API (needs pricing:GetProducts).

``python scripts/price_snapshot.py --region us-east-1 [--region us-west-2 ...] [--currency USD]``: each Region's
HyperPod instance prices (hyperpod_cdk.ops.price_list) replace that Region's entries; the file's date becomes
today's and each entry's record names the Price List's publication date. Regions not asked keep their entries.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

from hyperpod_cdk.aws.session import make_session
from hyperpod_cdk.ops.price_list import fetch_prices, pricing_client

SNAPSHOT = Path(__file__).resolve().parents[1] / "src" / "hyperpod_cdk" / "data" / "prices_snapshot.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--region", action="append", required=True, help="a Region whose prices to fetch")
    parser.add_argument("--currency", default="USD")
    parser.add_argument("--profile", default=None)
    args = parser.parse_args(argv)
    data = json.loads(SNAPSHOT.read_text())
    client = pricing_client(make_session(args.profile, None))
    for region in args.region:
        prices = fetch_prices(client, region, args.currency)
        data["regions"][region] = {
            name: {"per_hour": price.per_hour, "record": f"{price.source}, fetched by scripts/price_snapshot.py"}
            for name, price in sorted(prices.items())
        }
        print(f"{region}: {len(prices)} instance types")
    data["date"] = datetime.now(UTC).strftime("%Y-%m-%d")
    data["currency"] = args.currency
    data["source"] = "The AWS Price List API (GetProducts), fetched by scripts/price_snapshot.py on the date above."
    SNAPSHOT.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
