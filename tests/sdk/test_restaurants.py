"""sdk-python/examples/restaurants.py (the Firestore paper's restaurant app) runs against the
real sidecar: ratings added in transactions from several threads, a live top 10 that ends equal
to a fresh query, every restaurant's numRatings/avgRating equal to its ratings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import docstore

EXAMPLE = Path(__file__).resolve().parents[2] / "sdk-python" / "examples" / "restaurants.py"


def test_restaurant_example_runs(stack, coll):
    stack.sql(
        "select docstore.create_index(%s, %s)",
        coll,
        '[{"field": "city"}, {"field": "avgRating", "order": "desc"}]',
    )
    stack.sql("call docstore.build_indexes()")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSTORE_")}
    env.update({"DOCSTORE_URL": stack.url, "DOCSTORE_ADMIN_KEY": stack.admin_key})
    users, ratings = 4, 10
    run = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--collection",
            coll,
            "--users",
            str(users),
            "--ratings",
            str(ratings),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "final one equals a fresh query" in run.stdout
    assert run.stdout.count("top 10 at") >= 2
    # Checked again here, independently of the example's own check.
    with docstore.Client(stack.url, token=stack.admin_key) as db:
        total = 0
        for restaurant in db.collection(coll).stream():
            ratings_of = [
                r.get("rating") for r in restaurant.reference.collection("ratings").stream()
            ]
            assert restaurant.get("numRatings") == len(ratings_of)
            total += len(ratings_of)
        assert total == users * ratings
