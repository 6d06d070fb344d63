# An app update while its targets run (issue 12): version 1 targets share and watch; a version 2
# process opens the store and migrates it, once; the running v1 watcher stops with
# modelOutdated and a v1 widget is told to update; restarted as v2 the watcher catches up with no
# gap; history shows the migration. Then a migration of a 1,000,000-article store killed with
# kill -9 inside its transaction leaves the v1 store as it was, and the real one takes milliseconds.
# (Issue 12 names this story 07-upgrade.sh; 07 was taken by the restore scenario.)
. "$(dirname "$0")/lib.sh"
setup

share-extension share --model-version 1 --url https://u.example/1 --title one --category Swift --json >/dev/null
main-app sync --model-version 1 --json >/dev/null
background "$work/watch1.out" main-app watch --model-version 1 --json --for 120
watcher=$last_pid
share-extension share --model-version 1 --url https://u.example/2 --title two --json >/dev/null
wait_for_line "$work/watch1.out" '"Article/2"'
storectl schema --json >"$work/schema1.out"
assert_eq "$(jq_ 'sorted(set(l["version"] for l in lines))' <"$work/schema1.out")" "[1]" "storectl schema: model version 1"
storectl migrate --dry-run --model-version 2 --json >"$work/plan.out"
assert_eq "$(jq_ '[l["step"] for l in lines][:3]' <"$work/plan.out")" \
    '["add attribute Article.note string (constant time)", "rename attribute Category.name to Category.label (constant time)", "add entity Highlight"]' \
    "migrate --dry-run prints the plan"
assert_eq "$(storectl schema --json | jq_ 'j["version"]')" 1 "a dry run touches nothing"

# The update: the first v2 process to open the store (a share) migrates it.
share-extension share --model-version 2 --url https://u.example/3 --title three --category Swift --json >"$work/share3.out"
status=0; wait_exit "$watcher" 30 || status=$?
assert_eq "$status" 1 "the running v1 watcher stops at its next read"
grep -q "error: another process migrated the store to model 2 while this one runs model 1" "$work/watch1.out.err" \
    && ok "it says why: $(head -n 1 "$work/watch1.out.err")" || fail "watcher stderr: $(cat "$work/watch1.out.err")"
expect_error 1 "a v1 widget on the migrated store" widget show --model-version 1
err="$(widget show --model-version 1 2>&1 >/dev/null || true)"
[[ "$err" == *"migrated by a newer version: model 2; update the app"* ]] && ok "the v1 widget is told to update" \
    || fail "no modelNewer message: $err"

# Restarted as v2, the watcher's consumer catches up: the migration, then the share, no gap.
main-app sync --model-version 2 --json >"$work/sync2.out"
assert_eq "$(jq_ '[l.get("author") for l in lines[:-1]]' <"$work/sync2.out")" '["Migration", "ShareExtension"]' \
    "main-app (v2) merges the migration and the share"
assert_eq "$(jq_ '[j["expired"], j["reloaded"]]' <"$work/sync2.out")" "[false, false]" "with no gap: not expired, no reload"
storectl history --author Migration --json >"$work/migration.out"
assert_eq "$(jq_ '[len(lines), j["context"], j["changes"]]' <"$work/migration.out")" '[1, "migration.1-2", []]' \
    "storectl history shows one migration, with no object changes"
main-app list --model-version 2 --json >"$work/list.out"
assert_eq "$(jq_ '[l["category"] for l in lines]' <"$work/list.out")" '["Swift", null, "Swift"]' \
    "the renamed attribute kept its values"
assert_eq "$(storectl schema --json | jq_ '[l["attributes"] for l in lines if l["entity"] == "Category"]')" \
    '[["label string"]]' "storectl schema: Category.label"
verify_store
# Version 3 (derived attributes, the default): its first process migrates again, 2 → 3.
main-app list --search THREE --json >"$work/search.out"
assert_eq "$(jq_ '[l["title"] for l in lines]' <"$work/search.out")" '["three"]' "v3: list --search through the derived searchTitle"
assert_eq "$(storectl stats --json | jq_ 'j["articleCount"]')" '{"Swift": 2}' "v3: storectl stats shows the derived Category.articleCount"
verify_store

# kill -9 inside the migration of a store of 1,000,000 articles.
export SHAREDSTORE_GROUP="$work/big"
share-extension share --model-version 1 --url https://big.example/0 --title zero --json >/dev/null
sqlite3 "$SHAREDSTORE_GROUP/Store.sqlite" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 999999)
    INSERT INTO Article(title, url, createdAt, isRead, Z_GID) SELECT 'bulk ' || i, 'https://bulk.example/' || i, i, i % 2, randomblob(16) FROM n"
storectl recount --json >/dev/null
fingerprint() {
    sqlite3 "$SHAREDSTORE_GROUP/Store.sqlite" \
        "SELECT count(*), sum(length(title)), max(Z_PK), (SELECT value FROM ss_meta WHERE key = 'model_version') FROM Article"
}
before="$(fingerprint)"
background "$work/slow.out" sharedstore-helper migrate-slowly --group "$SHAREDSTORE_GROUP"
slow=$last_pid
wait_for_line "$work/slow.out" in-migration 120
kill -9 "$slow"; wait "$slow" 2>/dev/null || true
assert_eq "$(fingerprint)" "$before" "killed inside the migration: the v1 store is as it was"
assert_eq "$(sqlite3 "$SHAREDSTORE_GROUP/Store.sqlite" 'PRAGMA integrity_check')" ok "and intact"
assert_eq "$(storectl schema --json | jq_ 'j["version"]')" 1 "still model version 1"
assert_eq "$(widget show --model-version 1 --json | jq_ 'j["total"]')" 1000000 "a v1 widget reads it"
start=$(date +%s%N)
storectl migrate --model-version 2 --json >"$work/migrate.out"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
assert_eq "$(jq_ '[j["migrated"], j["from"], j["to"]]' <"$work/migrate.out")" "[true, 1, 2]" \
    "the real migration runs afterwards (storectl migrate: ${elapsed_ms} ms as a process)"
assert_eq "$(widget show --model-version 2 --json | jq_ 'j["total"]')" 1000000 "and v2 reads every article"
verify_store

# A store of format 2 (made before model versions; its meta kept a description of its model)
# opens as version 0: a v1 target migrates it (the kept counts), then v2 as above.
export SHAREDSTORE_GROUP="$work/legacy"
share-extension share --model-version 1 --url https://old.example/1 --title old --category Swift --json >/dev/null
main-app mark-read Article/1 --model-version 1 --json >/dev/null
sqlite3 "$SHAREDSTORE_GROUP/Store.sqlite" "DELETE FROM ss_meta WHERE key IN ('model_version', 'schema', 'catalog');
    UPDATE ss_meta SET value = '2' WHERE key = 'format'; DROP TABLE ss_counts;
    INSERT INTO ss_meta(key, value) VALUES ('model', 'entity Article
  attribute Article.title string
  attribute Article.url string
  attribute Article.createdAt date
  attribute Article.isRead bool
  relationship Article.category to-one Category.articles
entity Category
  attribute Category.name string
  relationship Category.articles to-many Article.category
  unique Category(name)')"
assert_eq "$(storectl schema --json | jq_ 'j["version"]')" 0 "a store of format 2 reads as version 0"
main-app list --json >"$work/legacy.out"
assert_eq "$(jq_ '[j["category"], j["isRead"]]' <"$work/legacy.out")" '["Swift", true]' "v2 opens it: data kept"
storectl history --json >"$work/legacy-history.out"
assert_eq "$(jq_ '[l["context"] for l in lines]' <"$work/legacy-history.out")" \
    '["share-extension.share", "main-app.mark-read", "migration.0-3"]' "one migration from version 0 to the newest"
assert_eq "$(jq_ 'lines[1]["changes"][0]["updated"]' <"$work/legacy-history.out")" '["isRead"]' \
    "history recorded under format 2 decodes"
verify_store
finish
