/** Opened by @jobs/conformance in a child process: a store on the same database as the test's. */
import 'reflect-metadata';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { TypeormJobStore } from '../src/index.js';

export async function createStore(args: { options: DataSourceOptions }): Promise<TypeormJobStore> {
  const dataSource = new DataSource(args.options);
  await dataSource.initialize();
  return new TypeormJobStore({ dataSource, destroyDataSourceOnClose: true });
}
