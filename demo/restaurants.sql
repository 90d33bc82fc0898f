-- The demo dataset `make up` loads into database docstore (once): the Firestore paper's
-- restaurants with ratings subcollections. Written with docstore.commit(), like an app would.
select docstore.commit('[
  {"set": "restaurants/one",   "data": {"name": "Ground Pit", "city": "SF", "type": "BBQ", "avgRating": 4.5, "numRatings": 2, "tags": ["brisket", "outdoor"], "address": {"street": "1 Market St", "zip": "94105"}, "opened": {"$timestamp": "2016-04-01T18:00:00Z"}, "location": {"$geo": [37.7936, -122.3958]}}},
  {"set": "restaurants/two",   "data": {"name": "Smoke House", "city": "SF", "type": "BBQ", "avgRating": 3.5, "numRatings": 1, "tags": ["ribs"], "address": {"street": "20 Mission St", "zip": "94105"}}},
  {"set": "restaurants/three", "data": {"name": "Taqueria Uno", "city": "SF", "type": "Mexican", "avgRating": 4.8, "numRatings": 1, "tags": ["tacos", "cheap"]}},
  {"set": "restaurants/four",  "data": {"name": "LA Grill", "city": "LA", "type": "BBQ", "avgRating": 4.1, "numRatings": 1, "tags": ["brisket"]}},
  {"set": "restaurants/five",  "data": {"name": "Noodle Bar", "city": "NY", "type": "Ramen", "avgRating": 4.6, "numRatings": 1, "tags": ["late night"]}},
  {"set": "restaurants/one/ratings/r1",   "data": {"rating": 5, "user": {"$ref": "users/alice"}, "text": "Best brisket in town"}},
  {"set": "restaurants/one/ratings/r2",   "data": {"rating": 4, "user": {"$ref": "users/bob"}}},
  {"set": "restaurants/two/ratings/r1",   "data": {"rating": 3.5, "user": {"$ref": "users/carol"}}},
  {"set": "restaurants/three/ratings/r1", "data": {"rating": 5, "user": {"$ref": "users/alice"}}},
  {"set": "restaurants/four/ratings/r1",  "data": {"rating": 4, "user": {"$ref": "users/bob"}}},
  {"set": "restaurants/five/ratings/r1",  "data": {"rating": 5, "user": {"$ref": "users/dave"}}},
  {"set": "users/alice", "data": {"name": "Alice", "joined": {"$timestamp": "2020-01-02T03:04:05Z"}}},
  {"set": "users/bob",   "data": {"name": "Bob"}},
  {"set": "users/carol", "data": {"name": "Carol"}},
  {"set": "users/dave",  "data": {"name": "Dave"}}
]') is not null as loaded;
select docstore.create_index('restaurants', '[{"field": "city"}, {"field": "avgRating", "order": "desc"}]') as index_city_rating;
select docstore.create_index('restaurants', '[{"field": "type"}, {"field": "avgRating", "order": "desc"}]') as index_type_rating;
select docstore.create_index('ratings', '[{"field": "rating"}]', scope => 'collection_group') as index_ratings_group;
call docstore.build_indexes();
