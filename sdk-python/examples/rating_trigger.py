"""An exactly-once write trigger endpoint (docs/triggers.md) for the restaurant app: each new
rating adds to its restaurant's ``numRatings`` and ``sumStars`` (the average is
``sumStars / numRatings``), exactly once per rating however often the sidecar delivers it.

A WSGI app (run here with the standard library's server)::

    TRIGGER_SECRET=whsec_... python rating_trigger.py 8088

and in psql, once (the secret is what create_trigger returns)::

    set docstore.trigger_url_prefixes = 'http://127.0.0.1:8088/';
    select docstore.create_trigger('ratings', 'restaurants/{id}/ratings/{rating}', '{create}',
                                   'http://127.0.0.1:8088/', 'exactly_once');
"""

from __future__ import annotations

import os
import sys
from wsgiref.simple_server import make_server

from docstore import triggers

SECRET = os.environ.get("TRIGGER_SECRET", "")


def app(environ, start_response):
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    try:
        delivery = triggers.parse(SECRET, environ.get("HTTP_X_DOCSTORE_SIGNATURE"), body)
    except triggers.InvalidSignature as e:
        start_response("401 Unauthorized", [("Content-Type", "text/plain")])
        return [str(e).encode()]
    writes = []
    if delivery.event == "create" and delivery.after is not None:
        stars = delivery.after["data"].get("stars", 0)
        restaurant = f"restaurants/{delivery.params['id']}"
        writes.append(triggers.increment(restaurant, {"numRatings": 1, "sumStars": stars}))
    start_response("200 OK", [("Content-Type", "application/json")])
    return [triggers.answer(writes)]


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8088
    make_server("127.0.0.1", port, app).serve_forever()
