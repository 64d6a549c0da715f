// Reads the data files duckdbcheck wrote (files.txt) with DuckDB and compares every row with expected.jsonl:
// the variant as JSON, timestamp_ns exactly, timestamptz_ns at DuckDB's precision (microseconds). Exits 1 on a
// difference; prints what matched. Run by scripts/duckdb-read.sh.
import { DuckDBInstance } from '@duckdb/node-api';
import fs from 'fs';
import path from 'path';
import { isDeepStrictEqual } from 'util';

const dir = process.argv[2];
const expected = new Map();
for (const line of fs.readFileSync(path.join(dir, 'expected.jsonl'), 'utf8').trim().split('\n')) {
  const r = JSON.parse(line);
  expected.set(`${r.table}/${r.id}`, r);
}
const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
const version = (await con.runAndReadAll('select version() as v')).getRowObjectsJson()[0].v;
console.log(`DuckDB ${version}`);
let bad = 0;
const seen = new Set();
const stats = {};
for (const line of fs.readFileSync(path.join(dir, 'files.txt'), 'utf8').trim().split('\n')) {
  const [table, location] = line.split('\t');
  const file = location.replace(/^file:\/\//, '');
  const types = (await con.runAndReadAll(`describe select v, ts, tstz from read_parquet('${file}')`))
    .getRowObjectsJson().map((c) => `${c.column_name} ${c.column_type}`).join(', ');
  console.log(`${table}: ${path.basename(file)}: ${types}`);
  const rows = (await con.runAndReadAll(`select id, v is null as vnull, v::JSON::VARCHAR as v,
    epoch_ns(ts)::VARCHAR as ts, epoch_ns(tstz)::VARCHAR as tstz from read_parquet('${file}')`)).getRowObjectsJson();
  const st = (stats[table] ??= { rows: 0, variants: 0, variantNulls: 0, ts: 0, tstz: 0, tstzNanosLost: 0 });
  for (const got of rows) {
    const key = `${table}/${got.id}`;
    const want = expected.get(key);
    seen.add(key);
    st.rows++;
    const fail = (what) => { bad++; if (bad <= 20) console.log(`MISMATCH ${key} ${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`); };
    if (!want) { fail('unexpected row'); continue; }
    // DuckDB reads the variant null as SQL NULL: both compare as JSON null.
    if (want.v === undefined || want.v === 'null') {
      if (!got.vnull) fail('variant');
      else if (want.v === 'null') st.variantNulls++;
    } else if (got.vnull || !isDeepStrictEqual(JSON.parse(got.v), JSON.parse(want.v))) {
      fail('variant');
    } else {
      st.variants++;
    }
    if ((got.ts ?? undefined) !== want.ts) fail('ts'); else if (want.ts !== undefined) st.ts++;
    if (want.tstz === undefined) {
      if (got.tstz !== null) fail('tstz');
    } else {
      // TIMESTAMP WITH TIME ZONE holds microseconds: DuckDB drops the nanoseconds (towards zero).
      const micros = (BigInt(want.tstz) / 1000n) * 1000n;
      if (got.tstz !== micros.toString()) fail('tstz');
      else { st.tstz++; if (micros.toString() !== want.tstz) st.tstzNanosLost++; }
    }
  }
}
for (const key of expected.keys()) {
  if (!seen.has(key)) { bad++; if (bad <= 20) console.log(`MISSING ${key}`); }
}
for (const [table, st] of Object.entries(stats)) {
  console.log(`${table}: ${st.rows} rows: ${st.variants} variants equal as JSON, ${st.variantNulls} variant nulls read as NULL, ` +
    `${st.ts} timestamp_ns exact, ${st.tstz} timestamptz_ns equal at microseconds (${st.tstzNanosLost} lost their nanoseconds)`);
}
if (bad > 0) {
  console.log(`${bad} differences`);
  process.exit(1);
}
console.log('every row matches');
