-- The demo's open ruleset ("pg_docstore demo: open ruleset"): `make up` (scripts/up.sh) installs
-- it on the (default) database when that database has no rules, so the demo answers anonymous
-- and JWT callers. A database without rules denies every client (docs/rules.md, "A database
-- without rules"); this one lets anyone read and write everything, which is for development
-- only. Replace it with real rules (select docstore.set_rules(...)) or close the database again
-- (select docstore.drop_rules()).
select docstore.set_rules($rules$rules_version = '2';
// pg_docstore demo: open ruleset, installed by make up (demo/open_rules.sql).
// Anyone may read and write every document: for development only (docs/rules.md).
service cloud.firestore {
  match /databases/{database}/documents {
    match /{document=**} {
      allow read, write: if true;
    }
  }
}$rules$, '(default)')
where not exists (select from docstore.rules where database_id = '(default)');
