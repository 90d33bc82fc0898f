//! `docstore.index_entries`: the exact delta of a document's entries (written together with
//! the entity by `storage::entities`).

/// Entries in `old` but not `new`, and in `new` but not `old` (both sorted, deduplicated).
pub fn delta(old: &[Vec<u8>], new: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a < b => {
                removed.push(a.clone());
                i += 1;
            }
            (Some(a), None) => {
                removed.push(a.clone());
                i += 1;
            }
            (_, Some(b)) => {
                added.push(b.clone());
                j += 1;
            }
            (None, None) => break,
        }
    }
    (removed, added)
}
