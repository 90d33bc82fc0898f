//! Stage 1: the replication connection and the pgoutput decoder (the live-query issue).
