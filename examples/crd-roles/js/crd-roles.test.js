// Unit tests of crd-roles under Node: `npm test` (or `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { kinds } from '@kubewasm/sdk';
import { Harness } from '@kubewasm/sdk/testing';
import CrdRoles, { CRD, readerRole } from './crd-roles.js';

const crd = (annotations = undefined) => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'my-tests.ctl.rlg.io', uid: 'crd-uid', generation: 1, ...(annotations && { annotations }) },
  spec: {
    group: 'ctl.rlg.io',
    scope: 'Cluster',
    names: { plural: 'my-tests', singular: 'my-test', kind: 'MyTest' },
    versions: [{ name: 'v1', served: true, storage: true }],
  },
  status: { acceptedNames: { plural: 'my-tests', kind: 'MyTest' }, storedVersions: ['v1'] },
});

const reader = {
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'my-tests.ctl.rlg.io-reader' },
  rules: [],
};

test('manifest and composition', () => {
  const h = new Harness(CrdRoles);
  const m = h.manifest;
  assert.deepEqual([m.name, m.version, m.primary, m.owns], ['crd-roles', '0.1.0', CRD, [kinds.CLUSTER_ROLE]]);
  assert.equal(m.primarySelector, undefined); // every CRD: the annotation decides in sync
  assert.equal(m.finalizer, undefined); // the garbage collector deletes the role with its CRD
  assert.deepEqual(h.composition, { children: [{ resource: kinds.CLUSTER_ROLE, updateStrategy: 'on-delete' }], selector: 'generated' });
});

test('an annotated CRD gets its reader ClusterRole, and no status', () => {
  const parent = crd({ 'enable-default-roles': 'yes' });
  const answer = new Harness(CrdRoles, { objects: [parent] }).sync(parent);
  assert.deepEqual(answer, { status: undefined, children: [reader], resyncAfter: undefined, finalized: false });
});

test('any value of the annotation counts, even empty', () => {
  for (const value of ['', 'no', 'false']) {
    const parent = crd({ 'enable-default-roles': value });
    assert.deepEqual(new Harness(CrdRoles).sync(parent).children, [reader], `annotation value ${JSON.stringify(value)}`);
  }
});

test('an unannotated CRD gets no role', () => {
  for (const parent of [crd(), crd({ 'other-annotation': 'yes' })]) {
    const answer = new Harness(CrdRoles).sync(parent);
    assert.deepEqual(answer.children, []);
    assert.equal(answer.status, undefined);
  }
});

test('a role it already has is answered the same (the host then writes nothing)', () => {
  const parent = crd({ 'enable-default-roles': 'yes' });
  const owned = {
    ...reader,
    metadata: {
      ...reader.metadata,
      ownerReferences: [
        { apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', name: 'my-tests.ctl.rlg.io', uid: 'crd-uid', controller: true },
      ],
    },
  };
  const h = new Harness(CrdRoles, { objects: [parent, owned] });
  assert.deepEqual(h.sync(parent).children, [reader]);
});

test('a CRD whose annotation went away answers no role (the host deletes the one it has)', () => {
  const parent = crd();
  const answer = new Harness(CrdRoles).sync(parent, { children: [reader] });
  assert.deepEqual(answer.children, []);
});

test('readerRole names the role after the CRD', () => {
  const other = { metadata: { name: 'widgets.example.com' } };
  assert.equal(readerRole(other).metadata.name, 'widgets.example.com-reader');
  assert.deepEqual(readerRole(other).rules, []);
});
