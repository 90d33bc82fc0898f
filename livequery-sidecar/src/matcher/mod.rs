//! Stage 3: targets matched against committed changes with docstore-core's matcher (the live-query issue).
