"""The restaurant app of the Firestore paper (Kesavan et al., VLDB 2023), with docstore.

Restaurants live in a collection, each with a ``ratings`` subcollection. Adding a rating is a
transaction: it reads the restaurant, adds the rating document and updates the restaurant's
``numRatings`` and ``avgRating`` together (retried when another rating of the same restaurant
commits first). A live top 10 of a city (``where city == ... order by avgRating desc limit
10``) is printed each time it changes while ratings pour in from several threads.

The code is python-firestore's: porting it means changing the import and the client
construction only. Run it against a sidecar with the admin key (or a token the rules allow)::

    DOCSTORE_URL=http://127.0.0.1:8787 DOCSTORE_ADMIN_KEY=... python restaurants.py

The top-10 query needs the composite index the demo creates (docs/demo.md)::

    select docstore.create_index('restaurants',
        '[{"field": "city"}, {"field": "avgRating", "order": "desc"}]');

It exits 0 when the last top 10 it printed equals a fresh run of the query and every
restaurant's ``numRatings``/``avgRating`` agree with its ratings; 1 otherwise.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading

import docstore
from docstore import FieldFilter, Query

CITIES = ["SF", "NYC"]
NAMES = ["Tartine", "Zuni", "Nopa", "Delfina", "Kokkari", "Flour", "Swan", "Nari", "Ernest"]


def add_restaurants(db: docstore.Client, collection: str, count: int, rng: random.Random) -> None:
    """``count`` restaurants in CITIES, without ratings yet, in one batch."""
    batch = db.batch()
    for i in range(count):
        ref = db.collection(collection).document(f"r{i:03d}")
        batch.set(
            ref,
            {
                "name": f"{rng.choice(NAMES)} {i}",
                "city": CITIES[i % len(CITIES)],
                "avgRating": 0.0,
                "numRatings": 0,
            },
        )
    batch.commit()


@docstore.transactional
def add_rating(transaction, restaurant_ref, rating: int, user: str) -> None:
    """Add a rating and fold it into the restaurant's average, atomically."""
    restaurant = restaurant_ref.get(transaction=transaction)
    num = restaurant.get("numRatings")
    avg = restaurant.get("avgRating")
    new_num = num + 1
    new_avg = (avg * num + rating) / new_num
    transaction.set(
        restaurant_ref.collection("ratings").document(), {"rating": rating, "userId": user}
    )
    transaction.update(restaurant_ref, {"numRatings": new_num, "avgRating": new_avg})


def top_ten(db: docstore.Client, collection: str, city: str) -> Query:
    """The city's ten best restaurants."""
    return (
        db.collection(collection)
        .where(filter=FieldFilter("city", "==", city))
        .order_by("avgRating", direction=Query.DESCENDING)
        .limit(10)
    )


class Board:
    """The live top 10 as last printed."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float]] = []
        self.updates = 0
        self.changed = threading.Condition()

    def on_snapshot(self, docs, changes, read_time) -> None:
        """python-firestore's callback signature: documents in order, changes, read time."""
        with self.changed:
            self.rows = [(d.get("name"), d.get("avgRating")) for d in docs]
            self.updates += 1
            moves = ", ".join(f"{c.type.name} {c.document.get('name')}" for c in changes)
            print(f"top 10 at {read_time.isoformat()} ({moves or 'first results'}):")
            for rank, (name, avg) in enumerate(self.rows, 1):
                print(f"  {rank:2d}. {name:<12} {avg:.3f}")
            self.changed.notify_all()


def rate(db, collection: str, restaurants: int, ratings: int, seed: int) -> None:
    """One user adding ``ratings`` ratings to random restaurants."""
    rng = random.Random(seed)
    for _ in range(ratings):
        ref = db.collection(collection).document(f"r{rng.randrange(restaurants):03d}")
        add_rating(db.transaction(max_attempts=50), ref, rng.randint(1, 5), f"user{seed}")


def consistent(db, collection: str) -> bool:
    """Every restaurant's numRatings and avgRating agree with its ratings subcollection."""
    ok = True
    for restaurant in db.collection(collection).stream():
        ratings = [r.get("rating") for r in restaurant.reference.collection("ratings").stream()]
        avg = sum(ratings) / len(ratings) if ratings else 0.0
        if (
            restaurant.get("numRatings") != len(ratings)
            or abs(restaurant.get("avgRating") - avg) > 1e-9
        ):
            print(f"{restaurant.id}: {restaurant.to_dict()} but ratings {ratings}", file=sys.stderr)
            ok = False
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", default="restaurants")
    parser.add_argument("--city", default="SF")
    parser.add_argument("--restaurants", type=int, default=24)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--ratings", type=int, default=15, help="ratings per user")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    db = docstore.Client()
    add_restaurants(db, args.collection, args.restaurants, random.Random(args.seed))
    board = Board()
    query = top_ten(db, args.collection, args.city)
    watch = query.on_snapshot(board.on_snapshot)
    try:
        users = [
            threading.Thread(
                target=rate,
                args=(db, args.collection, args.restaurants, args.ratings, args.seed + u),
            )
            for u in range(args.users)
        ]
        for user in users:
            user.start()
        for user in users:
            user.join()
        final = [(d.get("name"), d.get("avgRating")) for d in query.get()]
        with board.changed:
            caught_up = board.changed.wait_for(lambda: board.rows == final, timeout=60)
    finally:
        watch.unsubscribe()
    print(
        f"{board.updates} updates of the top 10; final one {'equals' if caught_up else 'DIFFERS FROM'} a fresh query"
    )
    return 0 if caught_up and consistent(db, args.collection) else 1


if __name__ == "__main__":
    sys.exit(main())
