//! Stage 5: routes, auth, errors and SSE.
