//! The benches' restaurant document, shared by `values` and `proto`.

/// A restaurant-like document of about 1 KB with 20 top-level fields of mixed types.
pub fn document() -> String {
    r#"{
      "name": "The Golden Spoon Bistro and Wine Bar",
      "city": "San Francisco", "state": "CA", "country": "USA",
      "type": "BBQ", "cuisine": ["american", "barbecue", "southern", "smokehouse"],
      "avgRating": 4.37, "numRatings": 1289, "price": 3, "open": true,
      "address": {"street": "1234 Market Street", "zip": "94103", "unit": null},
      "location": {"$geo": [37.7749, -122.4194]},
      "opened": {"$timestamp": "2015-06-01T18:30:00.000000Z"},
      "owner": {"$ref": "owners/alice"},
      "logo": {"$bytes": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="},
      "tags": ["outdoor seating", "late night", "happy hour", "family friendly", "vegan options"],
      "hours": {"mon": "11-22", "tue": "11-22", "wed": "11-22", "thu": "11-23", "fri": "11-24", "sat": "10-24", "sun": "10-21"},
      "description": "A neighbourhood favourite since 2015 serving slow-smoked brisket, ribs and seasonal sides, with a long list of Californian wines and local craft beers on tap.",
      "embedding": {"$vector": [0.12, -0.53, 0.33, 0.91, -0.07, 0.44, 0.18, -0.29]},
      "ratio": {"$double": "NaN"}
    }"#
    .to_owned()
}
