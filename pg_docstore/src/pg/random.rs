//! Random document IDs from Postgres' strong random source.

use crate::errors::DocstoreError;

const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A 20-character ID of `[A-Za-z0-9]`, like Firestore's auto IDs (about 119 bits).
///
/// # Errors
/// When the strong random source fails.
pub fn auto_id() -> Result<String, DocstoreError> {
    let mut id = String::with_capacity(20);
    while id.len() < 20 {
        let mut buf = [0u8; 32];
        // SAFETY: the buffer is valid for 32 writable bytes for the duration of the call.
        let ok = unsafe { pgrx::pg_sys::pg_strong_random(buf.as_mut_ptr().cast(), buf.len()) };
        if !ok {
            return Err(DocstoreError::Internal("pg_strong_random failed".into()));
        }
        // Rejection sampling keeps the distribution uniform: 248 = 4 * 62.
        for b in buf.iter().filter(|b| **b < 248) {
            if id.len() == 20 {
                break;
            }
            id.push(char::from(ALPHABET[usize::from(*b) % 62]));
        }
    }
    Ok(id)
}
