import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, type INestMicroservice } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  ClientProxyFactory,
  MessagePattern,
  Payload,
  Transport,
  type ClientProxy,
} from '@nestjs/microservices';
import { firstValueFrom } from 'rxjs';
import { createServer, type AddressInfo } from 'node:net';
import { Locked, LockModule, LockService } from '../../lib/index';

const tick = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A port the OS just handed out, for a server that cannot report the one it bound. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

@Controller()
class StockHandler {
  active = 0;
  maxActive = 0;
  stock = 10;
  tried = 0;

  @MessagePattern('deduct')
  @Locked('mq-stock:{0.sku}')
  async deduct(@Payload() _msg: { sku: string }): Promise<number> {
    this.maxActive = Math.max(this.maxActive, ++this.active);
    const read = this.stock;
    await tick(10);
    this.stock = read - 1;
    this.active--;
    return this.stock;
  }

  @MessagePattern('try')
  @Locked('mq-stock:{0.sku}', { waitTimeout: 0 })
  async tryDeduct(@Payload() msg: { sku: string }): Promise<string> {
    this.tried++;
    return msg.sku;
  }
}

describe('@Locked on a microservice message handler (TCP transport)', () => {
  let server: INestMicroservice;
  let client: ClientProxy;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [LockModule.forRoot({ backends: { mem: { type: 'memory' } } })],
      controllers: [StockHandler],
    }).compile();
    const port = await freePort();
    server = moduleRef.createNestMicroservice({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
      logger: false,
    });
    await server.listen();
    client = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    });
    await client.connect();
  });

  afterAll(async () => {
    await client?.close();
    await server?.close();
  });

  it('serializes concurrent messages for one key: no lost update', async () => {
    const replies = await Promise.all(
      Array.from({ length: 5 }, () => firstValueFrom(client.send<number>('deduct', { sku: 'a' }))),
    );
    const handler = server.get(StockHandler);
    expect(handler.stock).toBe(5);
    expect(handler.maxActive).toBe(1);
    expect([...replies].sort((x, y) => x - y)).toEqual([5, 6, 7, 8, 9]);
  });

  it('a busy lock fails the RPC call without running the handler (no HTTP mapping)', async () => {
    const locks = server.get(LockService);
    const held = await locks.acquire('mq-stock:b');
    try {
      const err = await firstValueFrom(client.send('try', { sku: 'b' })).catch((e: unknown) => e);
      // Nest's RPC filter reports any non-RpcException generically; the handler never ran.
      expect(err).toEqual({ status: 'error', message: 'Internal server error' });
      expect(server.get(StockHandler).tried).toBe(0);
    } finally {
      await held.release();
    }
    await expect(firstValueFrom(client.send('try', { sku: 'b' }))).resolves.toBe('b');
  });
});
