//! Stage 2: committed transactions, the retention buffer and snapshot visibility (the live-query issue).
