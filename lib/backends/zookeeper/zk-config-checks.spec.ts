import { describe, expect, it } from '@jest/globals';
import { connectionStringProblem, znodePathProblem } from './zk-config-checks';

describe('znodePathProblem', () => {
  it('accepts absolute paths ZooKeeper accepts', () => {
    for (const path of [
      '/locks',
      '/a/b-c_d.e',
      '/a b',
      '/ünï',
      '/\u00a0',
      '/x\ufdcf',
      '/.a',
      '/a..',
    ]) {
      expect({ path, problem: znodePathProblem(path) }).toEqual({ path, problem: undefined });
    }
  });

  it('refuses relative, empty and "."/".." elements, and the characters ZooKeeper refuses', () => {
    const refused = [
      'locks',
      '',
      '/',
      '/a/',
      '//a',
      '/a//b',
      '/.',
      '/a/./b',
      '/a/..',
      '/a\u0000b',
      '/a\u0001b',
      '/a\u001fb',
      '/a\u007fb',
      '/a\u009fb',
      '/a\ud800b',
      '/a\udfffb',
      '/🔒',
      '/a\ue000b',
      '/a\uf8ffb',
      '/a\ufdd0b',
      '/a\ufdefb',
      '/a\ufff0b',
      '/a\ufffeb',
      '/a\uffffb',
    ];
    for (const path of refused) {
      expect({ path, refused: znodePathProblem(path) !== undefined }).toEqual({
        path,
        refused: true,
      });
    }
  });

  it('names the refused character by its code point, not by echoing it', () => {
    expect(znodePathProblem('/a\u0000b')).toMatch(/U\+0000 \(at index 2\)/);
    expect(znodePathProblem('/a\u0000b')).not.toContain('\u0000');
  });
});

describe('connectionStringProblem', () => {
  it('accepts host[:port] lists with an optional chroot', () => {
    for (const value of [
      '127.0.0.1:2181',
      'localhost',
      'zk-1:2181,zk_2:2182,zk3.example.com:2183',
      '10.0.0.1:2181/app/locks',
      '127.0.0.1:2181/',
      'zk:65535',
    ]) {
      expect({ value, problem: connectionStringProblem(value) }).toEqual({
        value,
        problem: undefined,
      });
    }
  });

  it('refuses what the client would retry for ever or reject later', () => {
    for (const value of [
      '',
      '../',
      '..',
      '.',
      'a b',
      'host:',
      'host:0',
      'host:65536',
      'host:21a',
      ':2181',
      'a,,b',
      'a,',
      ',a',
      '-host:2181',
      'host-:2181',
      'a..b:2181',
      '[::1]:2181',
      '::1',
      'user:pass@host:2181',
      'host:2181/a/',
      'host:2181/a/../b',
      'host:2181//a',
      'host:2181/a\u0000',
      'host:2181/a\u007f',
      'host\u0000:2181',
    ]) {
      expect({ value, refused: connectionStringProblem(value) !== undefined }).toEqual({
        value,
        refused: true,
      });
    }
  });
});
