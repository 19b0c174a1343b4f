#!/usr/bin/env node
import { main } from '../src/build.js';

process.exitCode = await main(process.argv.slice(2));
