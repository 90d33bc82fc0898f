//! Stage 4: listen streams, targets, positions and resume (the live-query issue).
